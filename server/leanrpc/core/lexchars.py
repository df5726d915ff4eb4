"""The one lexer's character classes and the runs it reads with them.

Owns, for core.lexer (Lean's tokenizer ported; its docstring says which of
Lean's functions each rule comes from): the classes `isIdFirst`, `isIdRest`
(Lean.isLetterLike, isSubScriptAlnum) and the letters newer Lean versions
added, written once here as `re` character classes; and five readers over
them, each one `re` match in the pure implementation:

    plain_end(text, pos, limit)   a run with no literal or comment opener (_PLAIN)
    space_end(text, pos)          spaces, newlines, line comments (_WS)
    ident_part_end(text, pos)     isIdFirst isIdRest*, or -1 (_ID_PART)
    ident_end(text, pos)          identFnAux: parts joined by `.`, or -2 - where
                                  it cannot be read (`ident_error` says why)
    id_first(text, pos)           isIdFirst at pos
    versioned(text, pos)          a letter Lean versions read differently

The compiled twin (native/lexchars.pyx) runs the same rules as C loops, the
lexer's hot path (the code policy on every snippet, the axiom plan's mask);
it is handed `class_table()`, the flags of every code point built from the
class strings below, so the classes live here alone. LEANRPC_NO_EXTENSIONS
selects the pure readers (core._impl). tests/native/test_native_lexchars.py
holds the two to the same answers on every code point and on random and real
texts.
May import: core._impl, _native.lexchars (its compiled twin).
"""

from __future__ import annotations

import re

from ._impl import extensions_disabled

__all__ = [
    "IMPLEMENTATION",
    "class_table",
    "id_first",
    "ident_end",
    "ident_error",
    "ident_part_end",
    "plain_end",
    "space_end",
    "versioned",
]

# Lean.isLetterLike / isSubScriptAlnum (Init/Meta): Char.isAlpha is ASCII.
_LETTER = (
    "\u03b1-\u03ba\u03bc-\u03c9\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9\u03ca-\u03fb"
    "\u1f00-\u1ffe\u2100-\u214f\U0001d49c-\U0001d59f"
)
_SUB = "\u2080-\u2089\u2090-\u209c\u1d62-\u1d6a"
_ID_FIRST = f"A-Za-z_{_LETTER}"
_ID_REST = f"A-Za-z0-9_'!?{_LETTER}{_SUB}"
# Letters newer Lean versions added to isLetterLike / isSubScriptAlnum.
_VERSIONED_CLASS = "\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u017f\u2c7c"
# What ends a run of ordinary characters in `_PLAIN` (its first alternative's
# complement): literal and comment openers, `#` (a `#`-word such as `#check`
# is a token that ends in a letter: a `'` after it is a char literal, not a
# prime), `0`, a tab or `\r`, and the
# Latin-1 and Latin Extended-A block with the versioned letters.
_PLAIN_STOP = "\"'«`#\\-/0\t\r\u00c0-\u017f\u2c7c"

_VERSIONED = re.compile(f"[{_VERSIONED_CLASS}]")
_WS = re.compile(r"(?:[ \n]+|\r\n|--[^\n]*)*")  # one alternative per position: `+` is safe
_ID_PART = re.compile(f"[{_ID_FIRST}][{_ID_REST}]*")
_ID_FIRST_CHAR = re.compile(f"[{_ID_FIRST}]")
# A run of text that holds no literal or comment opener (`"`, `«`, a
# backtick, `--`, `/-`, a `'` that is not a prime right after an ASCII letter
# or `_` of a name: a char literal's error would resume past its next
# characters and could split a name into a keyword; a second prime (`h''`)
# ends the run too, since a prime after a prime may follow a symbol token
# (`∑''`: Lean reads `∑'`, then a char literal), and the lexer reads the name
# from the run's last space on), no `0x`/`0b`/`0o` numeral, no tab or
# `\r`, no versioned letter: whatever its tokens, every space in it lies
# between tokens, in Lean's reading and in any reading Lean's error recovery
# resumes (a token or a character on). So a run cut at its last space before
# the next mark ends on a token boundary. The first alternative takes a
# whole run of ordinary characters per step (`+`): each position still has
# at most one alternative, so the match ends where it did with one
# character per step, several times faster (the axiom scan masks whole
# bodies with it, core.masking).
_PLAIN = re.compile(
    f"(?:[^{_PLAIN_STOP}]+|-(?!-)|/(?!-)|0(?![xXbBoO])|(?<=[A-Za-z_])(?<![0-9][eE])')*"
)

# The compiled twin's flags (native/lexchars.pyx), one byte per code point.
TABLE_SIZE = 0x20000  # every class above ends below U+1D5A0
ID_FIRST, ID_REST, VERSIONED, PLAIN_STOP = 1, 2, 4, 8


def class_table() -> bytes:
    """The flags of every code point below TABLE_SIZE, from the classes above
    (the characters above it are in none of them)."""
    table = bytearray(TABLE_SIZE)
    for flag, spec in (
        (ID_FIRST, _ID_FIRST),
        (ID_REST, _ID_REST),
        (VERSIONED, _VERSIONED_CLASS),
        (PLAIN_STOP, _PLAIN_STOP),
    ):
        for low, high in _ranges(spec):
            for code in range(low, high + 1):
                table[code] |= flag
    return bytes(table)


def _ranges(spec: str) -> list[tuple[int, int]]:
    """A character class's body (`a-z_é`; `\\-` is a `-`, the only escape
    the classes above use) as inclusive code point ranges."""
    out, i = [], 0
    while i < len(spec):
        if spec.startswith("\\-", i):
            out.append((ord("-"), ord("-")))
            i += 2
        elif i + 2 < len(spec) and spec[i + 1] == "-":
            out.append((ord(spec[i]), ord(spec[i + 2])))
            i += 3
        else:
            out.append((ord(spec[i]), ord(spec[i])))
            i += 1
    return out


def plain_end_py(text: str, pos: int, limit: int) -> int:
    return _PLAIN.match(text, pos, limit).end()


def space_end_py(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()


def ident_part_end_py(text: str, pos: int) -> int:
    found = _ID_PART.match(text, pos)
    return -1 if found is None else found.end()


def ident_end_py(text: str, pos: int) -> int:
    """`identFnAux` from `pos` (an isIdFirst or `«`): parts (`«…»` or isIdFirst
    isIdRest*) joined by `.` (isIdCont); its end, or -2 - the offset where it
    cannot be read: an unterminated `«`, a part that starts with no letter,
    or a letter Lean versions read differently right after it."""
    n = len(text)
    while True:
        if text[pos] == "«":
            close = text.find("»", pos + 1)
            if close < 0:
                return -2 - pos
            pos = close + 1
        else:
            end = ident_part_end_py(text, pos)
            if end < 0:  # callers check isIdFirst first: never, but not silently
                return -2 - pos
            pos = end
        if pos + 1 < n and text[pos] == ".":  # isIdCont
            if text[pos + 1] == "«" or id_first_py(text, pos + 1):
                pos += 1
                continue
        if versioned_py(text, pos):
            return -2 - pos
        return pos


def ident_error(text: str, at: int) -> str:
    """Why `ident_end` stopped at `at` (a LexError's reason)."""
    if text[at] == "«":
        return "an unterminated identifier escape"
    if versioned_py(text, at):
        return f"the character {text[at]!r}, read differently by Lean versions"
    return "an identifier part that does not start with a letter"


def id_first_py(text: str, pos: int) -> bool:
    return 0 <= pos < len(text) and _ID_FIRST_CHAR.match(text, pos) is not None


def versioned_py(text: str, pos: int) -> bool:
    return 0 <= pos < len(text) and _VERSIONED.match(text, pos) is not None


if extensions_disabled():
    plain_end, space_end, ident_part_end = plain_end_py, space_end_py, ident_part_end_py
    ident_end = ident_end_py
    id_first, versioned = id_first_py, versioned_py
    IMPLEMENTATION = "python"
else:  # the compiled twin (native/lexchars.pyx), handed the classes above
    from .._native import lexchars as _twin

    _twin.set_classes(class_table())
    plain_end, space_end, ident_part_end = _twin.plain_end, _twin.space_end, _twin.ident_part_end
    ident_end = _twin.ident_end
    id_first, versioned = _twin.id_first, _twin.versioned
    IMPLEMENTATION = "native"
