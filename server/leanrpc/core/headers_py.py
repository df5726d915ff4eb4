"""Split a Lean snippet into header, preamble and body, as Lean parses it.

This file is the single source of both implementations: it runs as plain
Python (`leanrpc.core.headers_py`) and native/headers.pyx compiles it
unchanged with Cython (`leanrpc._native.headers`), like aiohttp's websocket
reader. Keep it Cython-compatible: no `from __future__` imports, and no negative
indices (the build compiles with wraparound=False).

**Header** (Lean 4 ``src/Lean/Parser/Module.lean``)::

    header := ["module"] ["prelude"] import*
    import := atomic(["public"] ["meta"] "import") ["all"] ident

One module per ``import`` keyword: ``import Mathlib Aesop`` is the header
``import Mathlib`` followed by the body ``Aesop``, on which Lean reports a
parse error, as it does for a whole file. The header may end in the middle of
a line (``import Mathlib theorem t ...``) and a command may span lines
(``import\\n  Mathlib``). Whitespace between tokens includes ``--`` and nested
``/- -/`` comments, but not doc comments (``/--``, ``/-!``): Lean reads those
as tokens, so a module doc ends the header. Anything else ends it too; an
``import`` later in the text stays in the body, where Lean rejects it.

**Preamble**: after the header, ``open ...`` and ``set_option NAME VALUE``
commands that the pool may build once and cache. A command is taken only
when it is all on one line (no continuation: ``open Real\\n  Nat`` and
``open Nat\\n  hiding add_comm`` continue on the next line), has no ``in``,
nothing but a line comment follows it on its line, and the next token
starts a new command (a command keyword, ``#cmd``, ``@[``, a doc comment) or
the text ends. Module docs (``/-! -/``) between preamble commands count as
blank lines. The first command that fails a rule, and everything after it,
stays in the body: Lean then reads it exactly as written.

**Lean versions**: ``module``, ``public``, ``meta`` and ``all`` are header
words since Lean's module system (v4.22+); older versions read
``import runtime M`` or only ``import M``. The splitter follows the current
grammar for every version: a header with the new words goes to the REPL as
written, and an older Lean refuses it (REJECTED, a failed header), where it
would have been a parse error of the file. A module literally named
``runtime`` is read as a module name.

**Body**: the rest of the text, character for character. It starts at the
beginning of the line after the last header or preamble command, or, when
other text follows that command on its line, right after the command
(`body_start_column` > 0).
"""

import dataclasses
import re

__all__ = ["HeaderSplit", "decided_by", "doc_closes", "split_header"]


@dataclasses.dataclass(frozen=True, slots=True)
class HeaderSplit:
    """A snippet cut into the parts the pool sends separately.

    Attributes:
        imports: the header commands (``module``, ``prelude``, each import
            with its modifiers), one per line, in order, single-spaced.
        import_key: like `imports`, duplicate lines dropped: the cache key
            and the text the worker loads.
        modules: the imported modules, in order, duplicates dropped.
        preamble: lines 1 .. body_start_line-1, each followed by "\\n"; the
            cached ``open``/``set_option`` commands sit at their original
            line and column (comments inside become spaces), all other
            text is removed.
        preamble_key: the preamble commands, whitespace collapsed, one per
            line; "" if none.
        body: the text from (body_start_line, body_start_column) on, exactly
            as given.
        body_start_line: 1-based line number where the body starts.
        body_start_column: 0-based column (in code points) where the body
            starts; 0 unless the header ended in the middle of a line.
    """

    imports: str
    import_key: str
    modules: tuple[str, ...]
    preamble: str
    preamble_key: str
    body: str
    body_start_line: int
    body_start_column: int = 0

    @property
    def padded_body(self) -> str:
        """The body preceded by blank lines and spaces, so REPL positions are user positions."""
        return "\n" * (self.body_start_line - 1) + " " * self.body_start_column + self.body


# Token kinds.
_END = 0  # end of text
_NAME = 1  # identifier (possibly dotted, «escaped»), not a keyword
_WORD = 2  # keyword
_STRING = 3
_NUMBER = 4
_DOC = 5  # /-- doc comment (belongs to the next declaration)
_MODULE_DOC = 6  # /-! module doc
_OTHER = 7  # any other symbol, or text the scanner cannot read (unterminated)

_SPACE = re.compile(r"[ \t\r\n]+")
_COMMENT_MARK = re.compile(r"/-|-/")
_STRING_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NUMBER_TOKEN = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_ATOM = r"(?:«[^»]*»|[^\W\d][\w'!?]*)"
_NAME_TOKEN = re.compile(rf"{_ATOM}(?:\.{_ATOM})*")
_SYMBOL_TOKEN = re.compile(r"->|#[^\W\d][\w'!?]*|@\[|.", re.S)
_SPACES_OUTSIDE_QUOTES = re.compile(r'«[^»]*»|"(?:[^"\\]|\\.)*"|[ \t\r]+', re.S)
_LINE_TAIL = re.compile(r"[ \t\r]*(?:--[^\n]*)?(?:\n|$)")

_OPEN_WORDS = frozenset(["scoped", "hiding", "renaming", "→", "->", "(", ")"])
# Words that begin a command: a preamble command is complete when the next
# token is one of these (or #cmd, @[, a doc comment, the end).
_COMMAND_WORDS = frozenset(
    """abbrev add_decl_doc attribute axiom builtin_initialize class coinductive declare_syntax_cat
    def deriving elab elab_rules end example export import include inductive infix infixl infixr
    initialize instance lemma local macro macro_rules mutual namespace noncomputable notation omit
    opaque open partial postfix prefix private protected public scoped section set_option structure
    syntax theorem universe unsafe variable alias irreducible_def notation3""".split()
)
# Keywords: never a module name or an open/set_option argument.
_KEYWORDS = _COMMAND_WORDS | frozenset(
    """at by do else fun have hiding if in let match meta renaming show then where with
    all module prelude""".split()
)


def split_header(code: str) -> HeaderSplit:
    """Cuts `code` into header, preamble and body (see the module docstring).

    Handles LF and CRLF line ends, a leading BOM, tabs, and a missing final
    newline. No character of the body is dropped or changed.
    """
    if not isinstance(code, str):
        raise TypeError(f"split_header() takes str, got {type(code).__name__}")
    origin = 1 if code.startswith("\ufeff") else 0
    commands = []
    modules = []
    body_start = 0
    pos = _skip_space(code, origin, False)
    kind, end = _token(code, pos)
    for word in ("module", "prelude"):
        if kind == _WORD and code[pos:end] == word:
            commands.append(word)
            body_start = end
            pos = _skip_space(code, end, False)
            kind, end = _token(code, pos)
    while True:
        words = []
        at, at_kind, at_end = pos, kind, end
        for word in ("public", "meta"):
            if at_kind == _WORD and code[at:at_end] == word:
                words.append(word)
                at = _skip_space(code, at_end, False)
                at_kind, at_end = _token(code, at)
        if not (at_kind == _WORD and code[at:at_end] == "import"):
            break  # atomic: `public section` is a command, not a header
        words.append("import")
        at = _skip_space(code, at_end, False)
        at_kind, at_end = _token(code, at)
        if at_kind == _WORD and code[at:at_end] == "all":
            words.append("all")
            at = _skip_space(code, at_end, False)
            at_kind, at_end = _token(code, at)
        if at_kind != _NAME:
            break  # `import` without a module: left to Lean, in the body
        module = code[at:at_end]
        commands.append(" ".join(words) + " " + module)
        if module not in modules:
            modules.append(module)
        body_start = at_end
        pos = _skip_space(code, at_end, False)
        kind, end = _token(code, pos)
    body_start = _after_line(code, body_start)
    preamble_commands = []  # (offset, masked text, key)
    if body_start == 0 or code[body_start - 1] == "\n":
        pos = _skip_space(code, max(body_start, origin), True)
        while True:
            command = _preamble_command(code, pos)
            if command is None:
                break
            preamble_commands.append(command[:3])
            body_start = command[3]
            pos = _skip_space(code, body_start, True)
    lines_before = code.count("\n", 0, body_start)
    line_start = code.rfind("\n", 0, body_start) + 1
    column = body_start - line_start
    if line_start == 0 and origin and body_start:
        column -= 1
    if body_start == len(code) and column > 0:
        # Header to the end of a text without a final newline: the (empty)
        # body starts on the line after it.
        lines_before += 1
        column = 0
    preamble_lines = [""] * lines_before
    for offset, masked, _key in preamble_commands:
        start = code.rfind("\n", 0, offset) + 1
        indent = offset - start - (origin if start == 0 else 0)
        preamble_lines[code.count("\n", 0, offset)] = " " * indent + masked
    return HeaderSplit(
        imports="\n".join(commands),
        import_key="\n".join(list(dict.fromkeys(commands))),
        modules=tuple(modules),
        preamble="".join([line + "\n" for line in preamble_lines]),
        preamble_key="\n".join([key for _offset, _masked, key in preamble_commands]),
        body=code[body_start:],
        body_start_line=lines_before + 1,
        body_start_column=column,
    )


# Words a body may start with that are no header or preamble word: at one of
# them, followed by whitespace, `split_header` stops and reads no further.
_BODY_WORDS = frozenset(
    """theorem lemma example def abbrev instance noncomputable namespace section variable
    universe structure inductive class axiom""".split()
)


def decided_by(code: str, split: HeaderSplit) -> tuple:
    """(n, doc): the leading characters of `code` that decided `split` (which
    is `split_header(code)`), n = 0 when that is not known for certain; and
    doc >= 0 when a doc comment opened at offset `doc` must also close for the
    decision to hold (-1 otherwise).

    The splitter is a function of the characters it reads. After the header
    and preamble it reads the text's next token, and then stops, when that
    token is a doc comment or one of `_BODY_WORDS` followed by whitespace:
    * a doc comment counts only by its kind: every reading of it asks "is
      the next token a doc comment?" and nothing reads past it. Its kind is
      decided by its first four characters (`/--` and one that is not `/`:
      `/--/` is a comment the splitter skips) and by its closing somewhere
      (`doc_closes`; an unterminated one is read to the end of the text).
      So n ends after those four characters: a GRPO group's completions, or
      a batch of problems under one header, share them;
    * a body word is read up to the whitespace after it (no name continues
      past it, and no header or preamble word is read ahead).
    Every other case is (0, -1): a header or preamble word (`public`,
    `import`, `open`, ... read further ahead), a token at or past the end, an
    unterminated comment or string. So any text that starts with `code[:n]`,
    is longer than `n` and (when doc >= 0) closes its doc comment, splits into
    the same header and preamble with the rest of its own text as the body
    (core/header_memo.py; tests/headers/test_header_memo.py fuzzes it)."""
    body_start = len(code) - len(split.body)
    origin = 1 if code.startswith("\ufeff") else 0
    pos = _skip_space(code, max(body_start, origin), True)
    kind, end = _token(code, pos)
    if kind == _DOC and pos + 4 < end <= len(code):
        return pos + 4, pos
    if (
        kind == _WORD
        and end < len(code)
        and code[pos:end] in _BODY_WORDS
        and code[end] in " \t\r\n"
    ):
        return end + 1, -1
    return 0, -1


def doc_closes(code: str, doc: int) -> bool:
    """The comment opened at `doc` (`/-`) closes in `code` (see `decided_by`)."""
    return _comment_end(code, doc + 2) >= 0


def _preamble_command(code: str, pos: int):
    """The open/set_option command at `pos` if the preamble may take it.

    Returns (offset, masked text, key, offset of the next line), or None.
    """
    kind, end = _token(code, pos)
    head = code[pos:end]
    if kind != _WORD or head not in ("open", "set_option"):
        return None
    tokens = [(kind, pos, end)]
    while True:
        nxt = _skip_space(code, end, False)
        if "\n" in code[end:nxt] or nxt >= len(code):
            break
        kind, end = _token(code, nxt)
        if kind == _END:
            break
        tokens.append((kind, nxt, end))
    last = tokens[len(tokens) - 1][2]
    tail = _LINE_TAIL.match(code, last)
    if tail is None or "\n" in code[pos:last]:
        return None  # text after the command on its line, or a token across lines
    following = _skip_space(code, last, True)
    kind, _ = _token(code, following)
    if not (kind == _END or kind == _DOC or _starts_command(code, following)):
        return None  # the command may continue on the next line
    if head == "open":
        if len(tokens) < 2:
            return None
        for token_kind, start, stop in tokens[1:]:
            if not (token_kind == _NAME or code[start:stop] in _OPEN_WORDS):
                return None
    else:
        if len(tokens) != 3 or tokens[1][0] != _NAME:
            return None
        value_kind, start, stop = tokens[2]
        if not (value_kind in (_NAME, _STRING, _NUMBER) or code[start:stop] in ("true", "false")):
            return None
    pieces = []
    cursor = pos
    for _kind, start, stop in tokens:
        pieces.append(" " * (start - cursor))
        pieces.append(code[start:stop])
        cursor = stop
    masked = "".join(pieces)
    key = _SPACES_OUTSIDE_QUOTES.sub(_one_space, masked)
    return pos, masked, key, tail.end()


def _starts_command(code: str, pos: int) -> bool:
    kind, end = _token(code, pos)
    if kind == _WORD:
        return code[pos:end] in _COMMAND_WORDS
    if kind == _OTHER:
        text = code[pos:end]
        return text.startswith("#") and len(text) > 1 or text == "@["
    return kind == _MODULE_DOC


def _after_line(code: str, pos: int) -> int:
    """`pos`, or the start of the next line if only a line comment follows on its line."""
    if pos == 0:
        return 0
    tail = _LINE_TAIL.match(code, pos)
    return pos if tail is None else tail.end()


def _skip_space(code: str, pos: int, module_docs: bool) -> int:
    """The offset of the first token at or after `pos`.

    Skips whitespace, ``--`` line comments and nested ``/- -/`` comments;
    with `module_docs`, also ``/-! -/`` module docs. An unterminated comment
    is not skipped (the scanner stops in front of it).
    """
    n = len(code)
    while pos < n:
        space = _SPACE.match(code, pos)
        if space is not None:
            pos = space.end()
            continue
        if code.startswith("--", pos):
            newline = code.find("\n", pos)
            pos = n if newline < 0 else newline
            continue
        if code.startswith("/-", pos):
            after = code[pos + 2 : pos + 3]
            if after == "-" and not code.startswith("/--/", pos):
                return pos
            if after == "!" and not module_docs:
                return pos
            close = _comment_end(code, pos + 2)
            if close < 0:
                return pos
            pos = close
            continue
        return pos
    return pos


def _comment_end(code: str, pos: int) -> int:
    """The offset after the ``-/`` that closes a comment opened before `pos`, or -1."""
    depth = 1
    while depth:
        mark = _COMMENT_MARK.search(code, pos)
        if mark is None:
            return -1
        pos = mark.end()
        depth += 1 if mark.group() == "/-" else -1
    return pos


def _token(code: str, pos: int) -> tuple:
    """(kind, end) of the token at `pos` (which is not whitespace)."""
    if pos >= len(code):
        return _END, pos
    if code.startswith("/-", pos):
        close = _comment_end(code, pos + 2)
        if close < 0:
            return _OTHER, len(code)
        return (_MODULE_DOC if code.startswith("/-!", pos) else _DOC), close
    name = _NAME_TOKEN.match(code, pos)
    if name is not None:
        text = name.group()
        return (_WORD if text in _KEYWORDS else _NAME), name.end()
    if code.startswith('"', pos):
        string = _STRING_TOKEN.match(code, pos)
        return (_OTHER, len(code)) if string is None else (_STRING, string.end())
    number = _NUMBER_TOKEN.match(code, pos)
    if number is not None:
        return _NUMBER, number.end()
    if code.startswith("«", pos):
        return _OTHER, len(code)  # unterminated «name»
    symbol = _SYMBOL_TOKEN.match(code, pos)
    return _OTHER, symbol.end()


def _one_space(match) -> str:
    found = match.group()
    return found if found.startswith("«") or found.startswith('"') else " "
