"""Source text indexing: positions <-> offsets, comments and strings.

Lean reports positions as (line, column): line 1-based, column a 0-based
code-point offset into the line. Python `str` indexing is also by code
point, so an offset is `line_start[line - 1] + column`. Lines are split on
"\\n" only, as Lean's FileMap does; a "\\r" stays part of its line.

The lexer here is just enough to tell trivia (whitespace and comments) from
code, so that snippets can be trimmed without cutting a comment in half or
mistaking a `--` inside a string for a comment.
"""

from __future__ import annotations

import bisect
from typing import Protocol

from leanrpc.core.leantext import block_comment_end, string_literal_end
from leanrpc.results import Position


class _HasLineColumn(Protocol):
    line: int
    column: int


class SourceText:
    """One source string, indexed for position and trivia lookups."""

    __slots__ = ("text", "_line_starts", "_comment", "_string", "_code")

    def __init__(self, text: str) -> None:
        self.text = text
        starts = [0]
        pos = text.find("\n")
        while pos != -1:
            starts.append(pos + 1)
            pos = text.find("\n", pos + 1)
        self._line_starts = starts
        self._comment, self._string = _lex(text)
        self._code: str | None = None

    # ---- positions -------------------------------------------------------

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def line_end(self, line: int) -> int:
        """Offset just past the last character of `line` (before its newline)."""
        if line < len(self._line_starts):
            return self._line_starts[line] - 1
        return len(self.text)

    def offset(self, line: int, column: int) -> int | None:
        """Offset of (line, column), or None if it is not a position in the text."""
        if not isinstance(line, int) or not isinstance(column, int):
            return None
        if isinstance(line, bool) or isinstance(column, bool):
            return None
        if line < 1 or line > len(self._line_starts) or column < 0:
            return None
        start = self._line_starts[line - 1]
        if start + column > self.line_end(line):
            return None
        return start + column

    def position(self, offset: int) -> Position:
        index = bisect.bisect_right(self._line_starts, offset) - 1
        return Position(line=index + 1, column=offset - self._line_starts[index])

    def column(self, offset: int) -> int:
        index = bisect.bisect_right(self._line_starts, offset) - 1
        return offset - self._line_starts[index]

    def line_start_of(self, offset: int) -> int:
        index = bisect.bisect_right(self._line_starts, offset) - 1
        return self._line_starts[index]

    # ---- trivia ------------------------------------------------------------

    def in_comment(self, offset: int) -> bool:
        return bool(self._comment[offset])

    def in_string(self, offset: int) -> bool:
        return bool(self._string[offset])

    def is_trivia(self, offset: int) -> bool:
        return self.text[offset].isspace() or bool(self._comment[offset])

    def trim(self, start: int, end: int) -> tuple[int, int]:
        """Shrink [start, end) past leading and trailing whitespace and comments."""
        while start < end and self.is_trivia(start):
            start += 1
        while end > start and self.is_trivia(end - 1):
            end -= 1
        return start, end

    def trim_end(self, start: int, end: int) -> int:
        while end > start and self.is_trivia(end - 1):
            end -= 1
        return end

    def code(self, start: int, end: int) -> str:
        """The text of [start, end) with comments blanked out (for keyword tests)."""
        if self._code is None:
            if any(self._comment):
                self._code = "".join(
                    " " if flag else c for c, flag in zip(self.text, self._comment)
                )
            else:
                self._code = self.text
        return self._code[start:end]


def slice_source(source: str, start: _HasLineColumn, end: _HasLineColumn) -> str:
    """The text of `source` between two positions (end exclusive).

    Args:
        source: the full text the positions refer to.
        start, end: objects with `line` (1-based) and `column` (0-based,
            code points), e.g. `leanrpc.results.Position`.

    Raises:
        ValueError: a position lies outside the text, or end is before start.
    """
    text = SourceText(source)
    a = text.offset(start.line, start.column)
    b = text.offset(end.line, end.column)
    if a is None or b is None:
        raise ValueError(f"position outside the source: {start} .. {end}")
    if b < a:
        raise ValueError(f"end {end} is before start {start}")
    return source[a:b]


_IDENT_CHAR_EXTRA = "_'!?"


def _is_ident_char(c: str) -> bool:
    return c.isalnum() or c in _IDENT_CHAR_EXTRA


def _lex(text: str) -> tuple[bytearray, bytearray]:
    """Mark the code points that belong to comments and to string literals.

    Handles `--` line comments, nested `/- -/` block comments, string
    literals with escapes, raw strings `r"…"`/`r#"…"#`, character literals
    and `«…»` identifiers (skipped so that their contents are not lexed).
    An unterminated comment or string runs to the end of the text.
    """
    n = len(text)
    comment = bytearray(n)
    string = bytearray(n)
    i = 0
    while i < n:
        c = text[i]
        if c == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j == -1 else j
            comment[i:j] = b"\x01" * (j - i)
            i = j
        elif c == "/" and text.startswith("/-", i):
            j = block_comment_end(text, i)
            comment[i:j] = b"\x01" * (j - i)
            i = j
        elif c == '"' or (
            c == "r"
            and (i == 0 or not _is_ident_char(text[i - 1]))
            and _raw_string_open(text, i) is not None
        ):
            if c == '"':
                j = string_literal_end(text, i)
            else:
                hashes = _raw_string_open(text, i) or 0
                close = '"' + "#" * hashes
                k = text.find(close, i + 2 + hashes)
                j = n if k == -1 else k + len(close)
            string[i:j] = b"\x01" * (j - i)
            i = j
        elif c == "'" and (i == 0 or not _is_ident_char(text[i - 1])):
            j = _char_literal_end(text, i)
            if j is None:
                i += 1
            else:
                string[i:j] = b"\x01" * (j - i)
                i = j
        elif c == "«":
            j = text.find("»", i + 1)
            i = n if j == -1 else j + 1
        else:
            i += 1
    return comment, string


def _raw_string_open(text: str, i: int) -> int | None:
    """Number of `#`s if a raw string literal starts at i (at the `r`)."""
    j = i + 1
    while j < len(text) and text[j] == "#":
        j += 1
    if j < len(text) and text[j] == '"':
        return j - i - 1
    return None


def _char_literal_end(text: str, i: int) -> int | None:
    n = len(text)
    if i + 2 < n and text[i + 1] != "\\" and text[i + 2] == "'" and text[i + 1] != "\n":
        return i + 3
    if i + 3 < n and text[i + 1] == "\\":
        j = text.find("'", i + 3)
        if j != -1 and j - i <= 10 and "\n" not in text[i:j]:
            return j + 1
    return None
