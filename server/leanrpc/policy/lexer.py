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

Interpolated strings. Whether a `"` opens an interpolated string (`s!"…"`,
`m!"…"`, `throwError "…"`, `trace[c] "…"`, any parser that asks for one) is
the parser's choice, not the lexer's: its `{…}` holes are terms (code: a
`by run_tac …` inside one runs), and a string literal inside a hole ends
where a plain reading would not (`s!"{"\""}"`). So a string whose plain
reading holds a `{` is read both ways: when both end at the same place, the
holes are code (visible, their own literals hidden); when they do not, the
span is `ambiguous` and the policy refuses the text (fail closed: the rest
of it would be read differently by the two readings).
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


def _string_spans(text: str, at: int) -> tuple[int, list[tuple[int, int, str]]]:
    """End and hidden spans of the string literal opening at `at`: one
    `string` span; the string pieces around its holes when it reads the same
    as an interpolated string; one `ambiguous` span when the two readings end
    in different places."""
    plain_end = _STRING.match(text, at).end()
    if text.find("{", at, plain_end) < 0:
        return plain_end, [(at, plain_end, "string")]
    read = _interpolated(text, at)
    if read is None or read[0] != plain_end:
        return plain_end, [(at, plain_end, "ambiguous")]
    return read


def _interpolated(text: str, at: int) -> tuple[int, list] | None:
    """The string at `at` read as interpolated: (end, spans), the holes left
    out of the string spans; None when a literal inside a hole is ambiguous."""
    n = len(text)
    spans = []
    piece = at
    pos = at + 1
    while pos < n:
        char = text[pos]
        if char == "\\":
            pos += 2
        elif char == '"':
            spans.append((piece, pos + 1, "string"))
            return pos + 1, spans
        elif char == "{":
            spans.append((piece, pos + 1, "string"))
            hole = _hole(text, pos + 1)
            if hole is None:
                return None
            pos, inner = hole
            spans.extend(inner)
            piece = pos - 1  # the closing brace belongs to the string again
        else:
            pos += 1
    spans.append((piece, n, "string"))
    return n, spans


_HOLE_MARK = re.compile(r"--|/-|\"|'|«|r#*\"|[{}]")


def _hole(text: str, pos: int) -> tuple[int, list] | None:
    """Just past the `}` closing an interpolation hole at `pos` (a term: its
    comments and literals hidden, nested strings read both ways), and those
    spans; None when a nested string is ambiguous."""
    depth = 1
    n = len(text)
    spans = []
    while pos < n:
        found = _HOLE_MARK.search(text, pos)
        if found is None:
            return n, spans
        at, mark = found.start(), found.group()
        if mark in "{}":
            depth += 1 if mark == "{" else -1
            pos = at + 1
            if not depth:
                return pos, spans
            continue
        if mark == '"':
            stop, inner = _string_spans(text, at)
            if any(kind == "ambiguous" for _s, _e, kind in inner):
                return None
            spans.extend(inner)
            pos = stop
            continue
        literal = _literal_at(text, at)
        if literal is None:
            pos = at + 1  # a prime, part of a name
        else:
            pos, inner = literal
            spans.extend(inner)
    return n, spans


def _literal_at(text: str, at: int) -> tuple[int, list[tuple[int, int, str]]] | None:
    """End and spans of the comment, literal or `«»` name opening at `at`
    (one of `_OPENER_TEXTS`), or None when none opens there (a prime)."""
    n = len(text)
    c = text[at]
    if c == "-":
        stop = text.find("\n", at)
        stop, kind = (n if stop < 0 else stop), "line"
    elif c == "/":
        stop, kind = _block_end(text, at), "block"
    elif c == '"':
        return _string_spans(text, at)
    elif c == "«":
        stop = text.find("»", at)
        stop, kind = (n if stop < 0 else stop + 1), "quoted"
    elif at and _NAME_CHAR.match(text, at - 1):
        return None  # a prime (h') or part of a name (for"…)
    elif c == "'":
        m = _CHAR.match(text, at)
        if m is None:
            return None
        stop, kind = m.end(), "char"
    else:
        m = _RAW_OPEN.match(text, at)
        if m is None:
            return None
        close = '"' + m.group(1)
        found = text.find(close, m.end())
        stop, kind = (n if found < 0 else found + len(close)), "raw"
    return stop, [(at, stop, kind)]


def hidden_spans(text: str, until: int | None = None) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every comment, string, raw string, char literal and
    `«»` name that starts before `until` (default: all), in order: the
    stretches where a keyword is only a mention. A string literal whose extent
    depends on interpolation is one `ambiguous` span (see above)."""
    spans = []
    end = -1
    for at in positions(text, _OPENER_TEXTS, until):
        if at < end:
            continue
        literal = _literal_at(text, at)
        if literal is not None:
            end, found = literal
            spans.extend(found)
    return spans


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and 0-based column (Lean's convention) of `offset`."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1)
