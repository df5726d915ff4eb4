"""Lean 4's lexical grammar, as far as the code policy needs it: where the
significant tokens are, with comments, strings and char literals skipped.

Owns: `hidden_spans(text)`, the comments, strings, raw strings, char
literals and `«»` names of a text, where a keyword is only a mention;
`positions` (every occurrence of some needles: the compiled twin in
leanrpc._native.policy, or `positions_py`, one str.find pass per needle,
under LEANRPC_NO_EXTENSIONS=1); `line_col`.
It reads nested block comments (`/- /- -/ -/`, doc comments too), line
comments, strings with escapes, raw strings (`r"…"`, `r#"…"#` with any
number of `#`), char literals (`'a'`, `'\\n'`, `'\\x41'`, `'\\u03B1'`; a prime
after a name, `h'`, is part of the name) and `«…»` names, so a mention in any
of them is not a token. The code policy runs on every snippet, so this is a
hot path: openers are found with str.find and only they are read in Python.
May import: core._impl, _native.policy (its compiled twin).
"""

from __future__ import annotations

import re

from ..core._impl import extensions_disabled

__all__ = ["IMPLEMENTATION", "hidden_spans", "positions", "positions_py", "line_col"]

# A character that continues a name (so a `'` after it is a prime, not a
# char literal, and an `r"` after it is not a raw string).
_IDENT_CHAR = r"[\w'!?\u2080-\u208e\u2090-\u209c\u1d62-\u1d6a\u2c7c\u00bb]"
_COMMENT_MARK = re.compile(r"/-|-/")


def _block_end(text: str, start: int) -> int:
    """Offset past the `-/` closing the `/-` at `start` (nested); len(text) if unclosed."""
    depth = 0
    for mark in _COMMENT_MARK.finditer(text, start):
        depth += 1 if mark.group() == "/-" else -1
        if depth == 0:
            return mark.end()
    return len(text)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.S)
_CHAR = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{1,4}|.)|[^\\'\n])'")
_RAW_OPEN = re.compile(r'r(#*)"')
_NAME_CHAR = re.compile(_IDENT_CHAR)
# Each opener is found with str.find (C speed); one regex alternation of them
# would try every branch at every character (Python's re has no first-character
# filter for alternations) and cost ten times as much.
_OPENER_TEXTS = ("--", "/-", '"', "«", "'", 'r"', "r#")


def positions_py(text: str, needles: tuple[str, ...], until: int | None = None) -> list[int]:
    """Sorted offsets of every occurrence of each needle (starting before `until`)."""
    found = []
    find = text.find
    end = len(text) if until is None else min(len(text), until + max(map(len, needles)))
    for needle in needles:
        at = find(needle, 0, end)
        while 0 <= at and (until is None or at < until):
            found.append(at)
            at = find(needle, at + 1, end)
    found.sort()
    return found


if extensions_disabled():
    positions = positions_py
    IMPLEMENTATION = "python"
else:  # the compiled twin (native/policy.pyx): one pass instead of one per needle
    from .._native.policy import positions

    IMPLEMENTATION = "native"


def hidden_spans(text: str, until: int | None = None) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every comment, string, raw string, char literal and
    `«»` name that starts before `until` (default: all), in order: the
    stretches where a keyword is only a mention."""
    spans = []
    end = -1
    n = len(text)
    for at in positions(text, _OPENER_TEXTS, until):
        if at < end:
            continue
        c = text[at]
        if c == "-":
            stop = text.find("\n", at)
            stop, kind = (n if stop < 0 else stop), "line"
        elif c == "/":
            stop, kind = _block_end(text, at), "block"
        elif c == '"':
            stop, kind = _STRING.match(text, at).end(), "string"
        elif c == "«":
            stop = text.find("»", at)
            stop, kind = (n if stop < 0 else stop + 1), "quoted"
        elif at and _NAME_CHAR.match(text, at - 1):
            continue  # a prime (h') or part of a name (for"…)
        elif c == "'":
            m = _CHAR.match(text, at)
            if m is None:
                continue
            stop, kind = m.end(), "char"
        else:
            m = _RAW_OPEN.match(text, at)
            if m is None:
                continue
            close = '"' + m.group(1)
            found = text.find(close, m.end())
            stop, kind = (n if found < 0 else found + len(close)), "raw"
        spans.append((at, stop, kind))
        end = stop
    return spans


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and 0-based column (Lean's convention) of `offset`."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1)
