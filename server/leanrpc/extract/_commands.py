"""Command spans and declared names, read from the source text.

Only a `full` infotree carries CommandInfo nodes; the filtered forms
(`original`, `tactics`, `substantive`) keep tactic nodes alone, several per
command when a declaration has several `by` blocks. So commands are also
found in the text: a command starts on a line whose first character (column
0, outside comments and strings) begins a command keyword, a modifier, an
attribute `@[` or a doc comment `/--`. Anything else at column 0 continues
the current command. A declaration keyword (after optional modifiers other
than `local`/`scoped`) also starts a command when the line is indented:
`theorem` inside `namespace Foo` is often indented, and a declaration
keyword never starts a line inside a proof. This is a heuristic; the caller
merges spans that a tactic block straddles, so a wrong cut never splits a
proof.
"""

from __future__ import annotations

import dataclasses
import re

from ._source import SourceText

# First tokens that open a declaration (the name follows).
_DECL_KEYWORDS = frozenset(
    {
        "theorem",
        "lemma",
        "def",
        "abbrev",
        "instance",
        "example",
        "structure",
        "class",
        "inductive",
        "coinductive",
        "axiom",
        "opaque",
        "irreducible_def",
    }
)

_MODIFIERS = frozenset(
    {
        "private",
        "protected",
        "public",
        "noncomputable",
        "partial",
        "unsafe",
        "nonrec",
        "scoped",
        "local",
        "meta",
    }
)

_OTHER_COMMANDS = frozenset(
    {
        "namespace",
        "section",
        "end",
        "open",
        "variable",
        "universe",
        "set_option",
        "attribute",
        "mutual",
        "deriving",
        "macro",
        "macro_rules",
        "syntax",
        "elab",
        "elab_rules",
        "notation",
        "infix",
        "infixl",
        "infixr",
        "prefix",
        "postfix",
        "initialize",
        "builtin_initialize",
        "declare_syntax_cat",
        "register_option",
        "omit",
        "include",
        "export",
        "import",
        "add_decl_doc",
        "run_cmd",
        "run_elab",
        "run_meta",
        "suppress_compilation",
    }
)

_WORD = re.compile(r"[A-Za-z_#][A-Za-z0-9_'!?]*")
# A Lean identifier: dotted parts, each plain or «quoted».
_IDENT_PART = r"(?:«[^»]*»|[^\s.:()\[\]{}⦃⦄⟨⟩,«»@]+)"
_IDENT = re.compile(_IDENT_PART + r"(?:\." + _IDENT_PART + r")*")
# `set_option o v in` / `open N in` in front of a command, on one line.
_IN_PREFIX = re.compile(
    r"(?:set_option[ \t]+\S+[ \t]+\S+|open(?:[ \t]+\S+)+?)[ \t]+in(?![A-Za-z0-9_'!?])"
)
_PRIORITY = re.compile(r"\(\s*priority\s*:=[^)]*\)")


@dataclasses.dataclass(slots=True)
class CommandSpan:
    start: int
    end: int
    keyword: str  # the declaration keyword, "" for other commands
    name: str


def split_commands(text: SourceText) -> list[CommandSpan]:
    """Command spans of the whole text, trailing trivia trimmed."""
    src = text.text
    starts: list[int] = []
    for line in range(1, text.line_count + 1):
        offset = text.offset(line, 0)
        if offset is None or offset >= len(src):
            continue
        if _starts_command(text, offset):
            starts.append(offset)
        elif _starts_indented_declaration(text, offset):
            starts.append(offset + len(src[offset:]) - len(src[offset:].lstrip(" \t")))
    # A doc comment, attribute, modifier or `set_option … in` on a line of
    # its own does not end a command: it belongs to the declaration on the following lines.
    merged: list[int] = []
    for start in starts:
        if merged and not _has_head(text, merged[-1], start):
            continue
        merged.append(start)
    starts = merged
    spans: list[CommandSpan] = []
    for i, start in enumerate(starts):
        limit = starts[i + 1] if i + 1 < len(starts) else len(src)
        end = text.trim_end(start, limit)
        if end <= start:
            continue
        keyword, name = describe_command(text, start, end)
        spans.append(CommandSpan(start, end, keyword, name))
    return spans


def _has_head(text: SourceText, start: int, end: int) -> bool:
    """Whether [start, end) has more than doc comments, attributes, modifiers, `… in`."""
    code = text.code(start, end)
    i, n = 0, len(code)
    while i < n:
        if code[i].isspace():
            i += 1
        elif code.startswith("@[", i):
            i = _skip_brackets(code, i + 1, "[", "]")
        elif _IN_PREFIX.match(code, i):
            i = _IN_PREFIX.match(code, i).end()
        else:
            word = _WORD.match(code, i)
            if word is None or word.group(0) not in _MODIFIERS:
                return True
            i = word.end()
    return False


def _starts_command(text: SourceText, offset: int) -> bool:
    src = text.text
    if src.startswith("/--", offset) and not src.startswith("/--/", offset):
        return True
    if src.startswith("@[", offset):
        return True
    if text.in_comment(offset) or text.in_string(offset) or src[offset].isspace():
        return False
    match = _WORD.match(src, offset)
    if match is None:
        return False
    word = match.group(0)
    return (
        word in _DECL_KEYWORDS
        or word in _MODIFIERS
        or word in _OTHER_COMMANDS
        or (word.startswith("#") and len(word) > 1)
    )


_INDENTED_MODIFIERS = _MODIFIERS - {"local", "scoped"}


def _starts_indented_declaration(text: SourceText, offset: int) -> bool:
    """An indented line whose first words are modifiers and a declaration keyword."""
    src = text.text
    i = offset
    while i < len(src) and src[i] in " \t":
        i += 1
    if i == offset or i >= len(src) or text.in_comment(i) or text.in_string(i):
        return False
    while True:
        match = _WORD.match(src, i)
        if match is None:
            return False
        word = match.group(0)
        if word in _DECL_KEYWORDS:
            return True
        if word not in _INDENTED_MODIFIERS:
            return False
        i = match.end()
        while i < len(src) and src[i] in " \t":
            i += 1


def describe_command(text: SourceText, start: int, end: int) -> tuple[str, str]:
    """(declaration keyword, declared name) of the command text, ("", "") if none.

    `example` and anonymous instances have the name "".
    """
    code = text.code(start, end)
    i = 0
    n = len(code)
    while True:
        while i < n and code[i].isspace():
            i += 1
        if code.startswith("@[", i):
            i = _skip_brackets(code, i + 1, "[", "]")
            continue
        match = _IN_PREFIX.match(code, i)
        if match:
            i = match.end()
            continue
        word = _WORD.match(code, i)
        if word is None:
            return "", ""
        token = word.group(0)
        if token in _MODIFIERS:
            i = word.end()
            continue
        if token == "class" and re.match(r"class\s+inductive\b", code[i:]):
            i = word.end()
            continue
        if token not in _DECL_KEYWORDS:
            return "", ""
        i = word.end()
        if token == "example":
            return token, ""
        while i < n and code[i].isspace():
            i += 1
        priority = _PRIORITY.match(code, i)
        if priority:
            i = priority.end()
            while i < n and code[i].isspace():
                i += 1
        ident = _IDENT.match(code, i)
        if ident is None or ident.group(0) in (":", ":="):
            return token, ""
        return token, ident.group(0)


def _skip_brackets(code: str, i: int, open_: str, close: str) -> int:
    depth = 0
    n = len(code)
    while i < n:
        if code[i] == open_:
            depth += 1
        elif code[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n
