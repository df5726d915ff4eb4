"""Stand-in lexer: Lean source text -> tokens, offsets -> positions.

Owns: the token regex (comments and whitespace dropped), `Positions` (1-based
lines, 0-based code-point columns), bracket tables and the message shape.
May import: leanrpc.core.leantext. Used by every other stand-in elaboration room.
"""

from __future__ import annotations

import bisect
import re

from ..core.leantext import block_comment_end

OPEN_BRACKETS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄", "@[": "]"}
CLOSE_BRACKETS = frozenset(OPEN_BRACKETS.values())

_TOKEN = re.compile(
    r"""(?P<str>"(?:[^"\\]|\\.)*")"""
    r"""|(?P<char>'(?:\\[^']*|[^'\\])')"""
    r"""|(?P<id>(?:«[^»]*»|[^\W\d][\w'!?]*)(?:\.(?:«[^»]*»|[^\W\d][\w'!?]*))*)"""
    r"""|(?P<num>0x[0-9a-fA-F]+|\d+(?:\.\d+)?)"""
    r"""|(?P<sym>:=|<;>|<\|>|<\||\|>|=>|->|<->|<-|\.\.|::|@\[|\#[A-Za-z_]\w*|[^\s\w])""",
    re.S,
)
_WS = re.compile(r"\s+")


class Tok:
    __slots__ = ("kind", "text", "start", "end")

    def __init__(self, kind, text, start, end):
        self.kind = kind
        self.text = text
        self.start = start
        self.end = end

    def __repr__(self):  # pragma: no cover - debugging aid
        return f"Tok({self.kind}, {self.text!r}, {self.start})"


def lex(text: str) -> list[Tok]:
    """Tokens of ``text``; comments and whitespace are dropped."""
    return list(iter_tokens(text))


def iter_tokens(text: str):
    prev = None
    i = 0
    n = len(text)
    match = _TOKEN.match
    ws = _WS.match
    while i < n:
        m = ws(text, i)
        if m:
            i = m.end()
            if i >= n:
                break
        c = text[i]
        if c == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if c == "/" and text.startswith("/-", i):
            i = block_comment_end(text, i)
            continue
        m = match(text, i)
        if m is None:  # pragma: no cover - the sym branch matches any non-space
            i += 1
            continue
        kind = m.lastgroup
        if kind == "char" and prev is not None and prev.end == i and prev.kind == "id":
            # a quote glued to an identifier is never a char literal
            kind = "sym"
            end = i + 1
        else:
            end = m.end()
        prev = Tok(kind, text[i:end], i, end)
        yield prev
        i = end


class Positions:
    """Offset -> (line, column) with 1-based lines and code-point columns."""

    __slots__ = ("starts",)

    def __init__(self, text: str):
        starts = [0]
        find = text.find
        j = find("\n")
        while j >= 0:
            starts.append(j + 1)
            j = find("\n", j + 1)
        self.starts = starts

    def line_col(self, off: int) -> tuple[int, int]:
        k = bisect.bisect_right(self.starts, off) - 1
        return k + 1, off - self.starts[k]

    def pos(self, off: int) -> dict:
        line, col = self.line_col(off)
        return {"line": line, "column": col}


def norm(s: str) -> str:
    return _WS.sub(" ", s).strip()


def message(severity: str, pos: dict, end: dict | None, data: str) -> dict:
    return {"severity": severity, "pos": pos, "endPos": end, "data": data}
