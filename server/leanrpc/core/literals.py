"""Lean's literal readers, ported from `src/Lean/Parser/Basic.lean` for the
one lexer (leanrpc.core.lexer): `numberFnAux` (with `takeDigitsFn`,
`decimalNumberFn`'s `parseOptDot`/`parseOptExp`), `strLitFnAux`,
`quotedCharCoreFn` (escapes, `stringGapFn`), `charLitFnAux`; and
`LexError`, where the text cannot be read for certain.

Owns: `number_end`, `plain_string_end`, `escape_end`, `char_literal_end`
(each: the offset just past the literal at `pos`), `LexError`.
May import: nothing of leanrpc (stdlib only).
"""

from __future__ import annotations

import re

__all__ = ["LexError", "number_end", "plain_string_end", "escape_end", "char_literal_end"]

_STRING_BODY = re.compile(r'[^"\\]*')
_GAP_REST = re.compile(r"[ \t\r]*")
_ESCAPE = re.compile(r"""[\\"'rnt]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}""")
_STR_ESCAPE = re.compile(r"""[\\"'rnt{]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}""")


class LexError(Exception):
    """The text cannot be read for certain at `offset` (Lean's own lexing
    error, or a place where two readings Lean may take differ)."""

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


def number_end(text: str, pos: int) -> int:
    """`numberFnAux`: binary, octal, hex, decimal and scientific literals."""
    n = len(text)
    nxt = text[pos + 1 : pos + 2]
    if text[pos] == "0" and nxt and nxt in "bBoOxX":
        digits = {"b": "01", "o": "01234567", "x": "0123456789abcdefABCDEF"}[nxt.lower()]
        return _take_digits(text, pos + 2, digits, True)
    i = _take_digits(text, pos + 1, "0123456789", False)
    c = text[i : i + 1]
    if c == ".":  # parseOptDot
        i += 1
        if text[i : i + 1].isdigit() and text[i] < "\x80":
            i = _take_digits(text, i, "0123456789", False)
        c = text[i : i + 1]
    if c and c in "eE":  # parseOptExp
        i += 1
        if text[i : i + 1] in ("-", "+"):
            i += 1
        if not (i < n and "0" <= text[i] <= "9"):
            raise LexError("a scientific literal without exponent digits", i)
        i = _take_digits(text, i, "0123456789", False)
    return i


def _take_digits(text: str, i: int, digits: str, need: bool) -> int:
    """`takeDigitsFn`: `many (many '_' >> many1 digit)`; a digit is needed
    first when `need`, and after every `_`."""
    n = len(text)
    while i < n:
        c = text[i]
        if c == "_":
            need = True
        elif c in digits:
            need = False
        else:
            break
        i += 1
    if need:
        raise LexError("a numeral missing a digit", i)
    return i


def plain_string_end(text: str, pos: int) -> int:
    """`strLitFnAux` from the `"` at `pos`: just past the closing quote."""
    n = len(text)
    i = pos + 1
    while True:
        i = _STRING_BODY.match(text, i).end()
        if i >= n:
            raise LexError("an unterminated string literal", pos)
        if text[i] == '"':
            return i + 1
        i = escape_end(text, i, in_string=True, braces=False)


def escape_end(text: str, i: int, in_string: bool, braces: bool) -> int:
    """`quotedCharCoreFn` at the backslash `i`: just past the escape
    (`isQuotableCharForStrInterpolant` adds `{` when `braces`)."""
    m = (_STR_ESCAPE if braces else _ESCAPE).match(text, i + 1)
    if m is not None:
        return m.end()
    if in_string and text[i + 1 : i + 2] == "\n":  # stringGapFn: one newline, then spaces
        j = _GAP_REST.match(text, i + 2).end()
        if text[j : j + 1] == "\n":
            raise LexError("a string gap with more than one newline", j)
        return j
    raise LexError("an invalid escape sequence", i)


def char_literal_end(text: str, pos: int) -> int | None:
    """`charLitFnAux` from the `'` at `pos`: just past the closing `'`, or
    None where Lean reports an error."""
    i = pos + 1
    if i >= len(text):
        return None
    if text[i] == "\\":
        m = _ESCAPE.match(text, i + 1)
        if m is None:
            return None
        i = m.end()
    else:
        i += 1
    return i + 1 if text[i : i + 1] == "'" else None
