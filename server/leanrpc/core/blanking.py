"""Comments and literals of Lean text blanked out, as the one lexer reads them.

Imported through core.masking, which picks this file's compiled build
(setup.py compiles it unchanged with Cython as core.blanking_c).

Owns: `mask` (comments, strings, raw and interpolated strings, char literals
and doc comments replaced by spaces, newlines kept, so every offset still
points at the same place) and `IDENT_CHAR` (a character that continues a
name: a prime after one is no char literal). Used by the declaration scan
(core/declarations.py) and the tests' statement cutter.

Where a comment or literal lies is not decided here: `mask` runs
core.lexer's `Lexer` (Lean's tokenizer, issue 43 item 1) with no marks, so
runs of plain text are passed over by one regex match and only literal
tokens are emitted, and blanks exactly the spans the lexer read as literals
(its STR, CHAR, RAW, DOC tokens; an interpolated string from its first
piece to its last, holes included) and as comments (what `whitespace`
skipped after each run). A text the lexer cannot read for certain raises
its LexError: no other reading of it is scanned (fail closed).
The comment openers (`--`, `/-`) are found in one pass over the text
(core.needles), not by a regex search per gap between tokens.
May import: leanrpc.core.lexer, leanrpc.core.needles.
"""

from __future__ import annotations

import re
from bisect import bisect_left

from .lexer import CHAR, DOC, PIECE, RAW, STR, Lexer
from .needles import positions

__all__ = ["IDENT_CHAR", "mask"]

IDENT_CHAR = re.compile(r"[\w'!?₀-₉ₐ-ₜᵢ-ᵪ]")
# What may open a comment in the text between two tokens (a run of plain
# text holds none: core.lexer's `_PLAIN`).
_COMMENT_OPENERS = ("--", "/-")
_BLANKED = frozenset((STR, CHAR, RAW, DOC))


def mask(text: str) -> str:
    """`text` with comments, strings (raw, interpolated), char literals and
    doc comments replaced by spaces (newlines kept), where the one lexer
    reads them; `«...»` names left alone. LexError where the lexer cannot
    read the text for certain."""
    lexer = Lexer(text, marks=[])
    lexer.fill(len(text))
    spans = _spans(text, lexer.out)
    if not spans:
        return text
    out = []
    keep = 0
    for start, stop in spans:
        out.append(text[keep:start])
        out.append(_blank(text[start:stop]))
        keep = stop
    out.append(text[keep:])
    return "".join(out)


def _spans(text: str, tokens) -> list[tuple[int, int]]:
    """(start, stop) of each comment and literal, in order, not overlapping."""
    spans: list[tuple[int, int]] = []
    gap = 0  # where the text after the last token starts
    depth = 0  # open interpolated strings
    opened = 0
    openers = positions(text, _COMMENT_OPENERS)
    for token in tokens:
        if depth == 0:
            _comments(openers, gap, token.start, spans)
        kind = token.kind
        if kind == PIECE:
            if text[token.start] == '"':
                if depth == 0:
                    opened = token.start
                depth += 1
            if text[token.end - 1] == '"':
                depth -= 1
                if depth == 0:
                    spans.append((opened, token.end))
        elif kind in _BLANKED and depth == 0:
            spans.append((token.start, token.end))
        gap = token.end
    _comments(openers, gap, len(text), spans)
    return spans


def _comments(openers: list[int], start: int, stop: int, spans: list[tuple[int, int]]) -> None:
    """The comments between two tokens: the text there is a run of plain
    tokens (no comment opener), then Lean's `whitespace`, which is blanked
    from its first comment opener on: the first of the text's `openers`
    (sorted) at or after `start` whose two characters lie before `stop`."""
    k = bisect_left(openers, start)
    if k < len(openers) and openers[k] + 2 <= stop:
        spans.append((openers[k], stop))


def _blank(chunk: str) -> str:
    """`chunk` as spaces, its newlines kept (string operations: a regex
    substitution per character was most of `mask`'s time)."""
    if "\n" not in chunk:
        return " " * len(chunk)
    return "\n".join([" " * len(line) for line in chunk.split("\n")])
