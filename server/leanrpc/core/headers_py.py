"""Split a Lean snippet into imports, preamble and body.

This file is the single source of both implementations: it runs as plain
Python (`leanrpc.core.headers_py`) and native/headers.pyx compiles it
unchanged with Cython (`leanrpc._native.headers`), like aiohttp's websocket
reader. Keep it Cython-compatible: no `from __future__` imports, and no negative
indices (the build compiles with wraparound=False).

The header region is the longest run of leading lines that are blank,
comments (``--``, nested ``/- -/``, module docs ``/-! -/``), ``import`` lines,
``open`` lines and ``set_option NAME VALUE`` lines. It ends earlier, at

* a doc comment ``/--`` (it belongs to the declaration after it);
* ``open ... in`` / ``set_option ... in`` (command modifiers);
* an ``import`` after any other command (Lean rejects it; it stays in the
  body so Lean reports it);
* any line the rules above do not recognise, e.g. ``open Foo theorem x ...``
  or an unterminated comment or string.

A block comment that spans several lines joins them into one unit: if its
last line is not a header line, the header ends where the comment began, so
the body never starts inside a comment. The final empty line of a text that
ends in a newline always belongs to the body.

Limitations (the snippet is then still sent whole, Lean reports the problem):
an ``open`` whose names continue on the next line ends the header there,
and so does a line with two commands.
"""

import dataclasses
import re

__all__ = ["HeaderSplit", "split_header"]


@dataclasses.dataclass(frozen=True, slots=True)
class HeaderSplit:
    """A snippet cut into the parts the pool sends separately.

    Attributes:
        imports: the import lines as written (comments removed, surrounding
            whitespace trimmed), joined with "\\n"; "" if none.
        import_key: normalized imports: one ``import X`` line per module, in
            order, duplicates dropped.
        modules: the imported modules, in order, duplicates dropped.
        preamble: lines 1 .. body_start_line-1, each followed by "\\n", with
            imports, comments and blank text emptied; what is left are the
            ``open``/``set_option`` commands at their original line and
            column (comments inside a command line become spaces).
        preamble_key: the preamble commands, whitespace collapsed, one per
            line; "" if none.
        body: the text from line body_start_line on, exactly as given.
        body_start_line: 1-based line number where the body starts.
    """

    imports: str
    import_key: str
    modules: tuple[str, ...]
    preamble: str
    preamble_key: str
    body: str
    body_start_line: int

    @property
    def padded_body(self) -> str:
        """The body preceded by blank lines, so REPL positions are user positions."""
        return "\n" * (self.body_start_line - 1) + self.body


# Line classes.
_BLANK = 0
_IMPORT = 1
_COMMAND = 2  # open / set_option
_OTHER = 3

# Flags from scanning a line.
_DOC = 1  # a doc comment /-- starts outside any comment
_MODULE_DOC = 2  # a module doc /-! starts outside any comment
_UNTERMINATED = 4  # a string or «name» runs past the line end

_OUTSIDE = re.compile(r'--|/-|"|«')
_INSIDE = re.compile(r"/-|-/")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_SPACES = re.compile(r"[ \t\r]+")
_ATOM = r"(?:«[^»\n]*»|[^\W\d][\w'!?]*)"
_NAME = re.compile(rf"{_ATOM}(?:\.{_ATOM})*")
_VALUE = rf'true|false|[0-9]+(?:\.[0-9]+)?|"(?:[^"\\]|\\.)*"|{_ATOM}(?:\.{_ATOM})*'
_SET_OPTION = re.compile(rf"set_option[ \t\r]+({_ATOM}(?:\.{_ATOM})*)[ \t\r]+({_VALUE})")
_SPACES_OUTSIDE_NAMES = re.compile(r"«[^»\n]*»|[ \t\r]+")
_OPEN_TOKEN = re.compile(r"«[^»\n]*»|[()]|[^\s()«]+")
_OPEN_WORDS = frozenset(["scoped", "hiding", "renaming", "→", "->", "(", ")"])
# Words that start or continue other commands. A header line holding one is
# not a header line: `open Real in`, `import A theorem x ...`.
_KEYWORDS = frozenset(
    """abbrev at attribute axiom builtin_initialize by class coinductive declare_syntax_cat def
    deriving do elab elab_rules else end example export fun have hiding if import in include
    inductive infix infixl infixr initialize instance lemma let local macro macro_rules match
    mutual namespace noncomputable notation omit opaque open partial postfix prefix private
    protected renaming scoped section set_option show structure syntax then theorem universe
    unsafe variable where with""".split()
)


def split_header(code: str) -> HeaderSplit:
    """Cuts `code` into imports, preamble and body (see the module docstring).

    Handles LF and CRLF line ends, a leading BOM, tabs, and a missing final
    newline. No character of the body is dropped or changed.
    """
    if not isinstance(code, str):
        raise TypeError(f"split_header() takes str, got {type(code).__name__}")
    lines = code.split("\n")
    limit = len(lines)
    if lines[limit - 1] == "":
        limit -= 1
    import_lines = []
    modules = []
    preamble_lines = []
    preamble_keys = []
    after_command = False  # an import from here on is not an import
    start = 0
    while start < limit:
        # One unit: lines joined by a block comment open across line ends.
        masked_unit = []
        depth = 0
        flags = 0
        stop = start
        while True:
            line = lines[stop]
            if stop == 0 and line.startswith("\ufeff"):
                line = line[1:]
            if line.endswith("\r"):
                line = line[: len(line) - 1]
            masked, depth, line_flags = _mask_comments(line, depth)
            masked_unit.append(masked)
            flags |= line_flags
            stop += 1
            if depth == 0 or stop >= limit:
                break
        if depth or flags & (_DOC | _UNTERMINATED):
            break
        classified = []
        seen_command = after_command
        for masked in masked_unit:
            kind, info = _classify(masked)
            if kind == _OTHER or (kind == _IMPORT and seen_command):
                break
            if kind == _COMMAND:
                seen_command = True
            classified.append((kind, masked, info))
        else:
            for kind, masked, info in classified:
                if kind == _IMPORT:
                    import_lines.append(masked.strip(" \t"))
                    for module in info:
                        if module not in modules:
                            modules.append(module)
                    preamble_lines.append("")
                elif kind == _COMMAND:
                    preamble_lines.append(masked.rstrip(" \t"))
                    preamble_keys.append(info)
                else:
                    preamble_lines.append("")
            after_command = seen_command or bool(flags & _MODULE_DOC)
            start = stop
            continue
        break
    offset = sum(map(len, lines[:start])) + start
    return HeaderSplit(
        imports="\n".join(import_lines),
        import_key="\n".join(["import " + module for module in modules]),
        modules=tuple(modules),
        preamble="".join([line + "\n" for line in preamble_lines]),
        preamble_key="\n".join(preamble_keys),
        body=code[offset:],
        body_start_line=start + 1,
    )


def _mask_comments(line: str, depth: int) -> tuple:
    """Blanks comments out of one line (one space per character).

    `depth` is the block-comment nesting at the line start. Returns the
    masked line, the depth at its end and flags. Lean's block comments nest
    and ignore strings; line comments and strings only matter outside.
    """
    pieces = []
    flags = 0
    n = len(line)
    pos = 0
    keep = 0  # start of the text not yet copied to pieces (or of the open comment)
    while pos < n:
        if depth:
            m = _INSIDE.search(line, pos)
            if m is None:
                break
            pos = m.end()
            if m.group() == "/-":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    pieces.append(" " * (pos - keep))
                    keep = pos
            continue
        m = _OUTSIDE.search(line, pos)
        if m is None:
            break
        found = m.group()
        at = m.start()
        if found == "--":
            pieces.append(line[keep:at])
            pieces.append(" " * (n - at))
            keep = pos = n
        elif found == "/-":
            pieces.append(line[keep:at])
            keep = at
            depth = 1
            pos = at + 2
            if line.startswith("-", pos):
                flags |= _DOC
                pos += 1
            elif line.startswith("!", pos):
                flags |= _MODULE_DOC
                pos += 1
        elif found == '"':
            string = _STRING.match(line, at)
            if string is None:
                flags |= _UNTERMINATED
                break
            pos = string.end()
        else:  # «
            close = line.find("»", at + 1)
            if close < 0:
                flags |= _UNTERMINATED
                break
            pos = close + 1
    if depth:
        pieces.append(" " * (n - keep))
    else:
        pieces.append(line[keep:])
    return "".join(pieces), depth, flags


def _classify(masked: str) -> tuple:
    """The class of a comment-free line, and its modules (imports) or key (commands)."""
    text = masked.strip(" \t\r")
    if not text:
        return _BLANK, None
    words = _SPACES.split(text)
    head = words[0]
    if head == "import":
        if len(words) > 1 and all(_is_name(word) for word in words[1:]):
            return _IMPORT, words[1:]
    elif head == "open":
        if len(words) > 1 and all(
            token in _OPEN_WORDS or _is_name(token) for token in _OPEN_TOKEN.findall(text, 4)
        ):
            return _COMMAND, _SPACES_OUTSIDE_NAMES.sub(_one_space, text)
    elif head == "set_option":
        option = _SET_OPTION.fullmatch(text)
        if option is not None and option.group(1) not in _KEYWORDS and option.group(2) not in _KEYWORDS:
            return _COMMAND, f"set_option {option.group(1)} {option.group(2)}"
    return _OTHER, None


def _one_space(match) -> str:
    found = match.group()
    return found if found.startswith("«") else " "


def _is_name(word: str) -> bool:
    return word not in _KEYWORDS and _NAME.fullmatch(word) is not None
