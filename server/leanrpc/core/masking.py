"""Comments and literals of Lean text blanked out, read as Lean's lexer reads them.

Owns: `mask` (comments, strings, raw and interpolated strings, char literals
replaced by spaces, newlines kept, so every offset still points at the same
place) and `IDENT_CHAR` (a character that continues a name: a prime after one
is no char literal). Used by the declaration scan (core/declarations.py) and
the reference parser. Imports nothing from leanrpc (core layer: text in, text out).
"""

from __future__ import annotations

import re

__all__ = ["IDENT_CHAR", "mask"]

IDENT_CHAR = re.compile(r"[\w'!?₀-₉ₐ-ₜᵢ-ᵪ]")
_COMMENT_MARK = re.compile(r"/-|-/")

# Every alternative starts with a literal, so the regex engine scans for their
# first characters in C; `\b` before `r#"` (a raw string, not the end of a
# name) is checked by hand (`_raw_start`): written into the pattern it made
# every search try each alternative at every position (issue 38 item 6).
_SPECIAL = re.compile(r"--|/-|\"|'|«|r#*\"")


def mask(text: str) -> str:
    """`text` with comments, strings (raw, interpolated) and char literals
    replaced by spaces (newlines kept), read as Lean's lexer reads them:
    nested block comments, `r#"..."#` raw strings, `'\\''` char literals,
    a prime inside a name (`foo'`) and `«...»` names left alone."""
    out = []
    pos = keep = 0
    while True:
        found = _SPECIAL.search(text, pos)
        if found is None:
            break
        pos = found.start()
        if found.group()[0] == "r" and not _raw_start(text, pos):
            pos += 1  # the end of a name (`bar"`): the `"` is read next
            continue
        stop = _literal_end(text, pos, found.group())
        if stop is None:  # not a literal here (a prime, a «name»): read on
            pos = _name_end(text, pos) if found.group() == "«" else pos + 1
            continue
        out.append(text[keep:pos])
        out.append(_blank(text[pos:stop]))
        pos = keep = stop
    out.append(text[keep:])
    return "".join(out)


def _blank(chunk: str) -> str:
    """`chunk` as spaces, its newlines kept (string operations: a regex
    substitution per character was most of `mask`'s time)."""
    if "\n" not in chunk:
        return " " * len(chunk)
    return "\n".join(" " * len(line) for line in chunk.split("\n"))


def _raw_start(text: str, pos: int) -> bool:
    """The `r` at `pos` starts a word (regex `\b`: no word character before it)."""
    if not pos:
        return True
    before = text[pos - 1]
    return not (before.isalnum() or before == "_")


def _name_end(text: str, pos: int) -> int:
    stop = text.find("»", pos)
    return len(text) if stop < 0 else stop + 1


def _literal_end(text: str, pos: int, mark: str) -> int | None:
    """Where the comment or literal starting at `pos` ends, None if there is none."""
    n = len(text)
    if mark == "--":
        stop = text.find("\n", pos)
        return n if stop < 0 else stop
    if mark == "/-":
        depth, stop = 1, pos + 2
        while depth:
            inner = _COMMENT_MARK.search(text, stop)
            if inner is None:
                return n
            depth += 1 if inner.group() == "/-" else -1
            stop = inner.end()
        return stop
    if mark.startswith("r"):  # r"..." / r#"..."#: no escapes, ends at "#...#
        close = '"' + "#" * (len(mark) - 2)
        stop = text.find(close, pos + len(mark))
        return n if stop < 0 else stop + len(close)
    if mark == '"':
        return _string_end(text, pos + 1, interpolated=pos > 0 and text[pos - 1] == "!")
    if mark == "'":
        if pos and IDENT_CHAR.match(text[pos - 1]):
            return None  # a prime of a name: foo', h''
        if pos + 1 < n and text[pos + 1] == "\\":
            stop = text.find("'", pos + 3)
            return None if stop < 0 or stop - pos > 12 else stop + 1
        if pos + 2 < n and text[pos + 2] == "'" and text[pos + 1] != "\n":
            return pos + 3
        return None
    return None


def _string_end(text: str, pos: int, interpolated: bool) -> int:
    """End of a string body starting at `pos`; `{...}` of an `s!"..."` is code."""
    n = len(text)
    while pos < n:
        char = text[pos]
        if char == "\\":
            pos += 2
        elif char == '"':
            return pos + 1
        elif char == "{" and interpolated:
            pos = _code_end(text, pos + 1)
        else:
            pos += 1
    return n


def _code_end(text: str, pos: int) -> int:
    """Just past the `}` closing an interpolation, skipping nested literals."""
    depth = 1
    n = len(text)
    while pos < n:
        found = re.compile(r"--|/-|\"|'|«|\br#*\"|[{}]").search(text, pos)
        if found is None:
            return n
        pos, mark = found.start(), found.group()
        if mark in "{}":
            depth += 1 if mark == "{" else -1
            pos += 1
            if not depth:
                return pos
            continue
        stop = _literal_end(text, pos, mark)
        pos = (_name_end(text, pos) if mark == "«" else pos + 1) if stop is None else stop
    return n
