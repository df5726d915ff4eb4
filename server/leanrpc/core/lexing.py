# cython: annotation_typing=False
"""The one Lean lexer: Lean 4's tokenizer (`src/Lean/Parser/Basic.lean`),
ported, for every server-side reader of Lean text (the code policy first).

Owns: `lex(text) -> list[Token]`, `Lexer` (the same, lazily, emitting
tokens only where the caller marks: leanrpc.policy.scan) and `LexError`
(reason and offset of the first place the text cannot be read for
certain), `ident_name` (the name an identifier token spells, `«»` removed),
`line_col`, `comment_end` (where a block comment ends: core.leantext).

Port, function by function (Basic.lean):
- `whitespace` / `finishCommentBlock`: spaces and newlines, `--` line
  comments, nested `/- -/` block comments; `/--` and `/-!` doc comments are
  tokens whose body `finishCommentBlock` reads (emitted as one `doc` token).
  A tab, an isolated `\\r` or an unterminated comment is an error, as in Lean.
- `tokenFnAux`, in its order: `"` -> `strLitFnAux` (escapes by
  `quotedCharCoreFn`, string gaps); `'` not followed by `'` ->
  `charLitFnAux`; a digit -> `numberFnAux` (`0b`/`0o`/`0x`,
  `decimalNumberFn` with `parseOptDot`/`parseOptExp`: `1.5`, `2e-3`); a
  backtick before `isIdFirst`/`«` -> `nameLitAux`; `r` before `#*"` ->
  `rawStrLitFnAux`; else the token table's longest match and
  `identFnAux` (`isIdFirst`/`isIdRest`, `«»` parts by
  `isIdBeginEscape`/`isIdEndEscape`, `.` continuation by `isIdCont`), the
  token winning when it is at least as long (`isToken`: keywords).
- `interpolatedStr`: whether a `"` opens one is the parser's choice. A
  string with a `{` is read both ways; where the readings end in different
  places, the string is read plainly only after a token that no
  interpolating parser follows (an operator or opening bracket), and is an
  error ("ambiguous") anywhere else. Where both agree, the holes' tokens are
  emitted too (they may be code), and, unless the string follows such a
  token, the offsets of its pieces after a hole are kept (`after_hole`:
  should a hole not parse, Lean reads on from inside the string, and the
  policy refuses what it would find there).

The token table is Lean's plus Mathlib's and not known here, so keywords come
out as `ident` tokens (the policy compares names), `#` and a lowercase word
of two or more characters glued to it as one `hash` token (the policy allows
only exact read-only commands; `#` and one letter is `#`, then the letter's
own token; such a word followed by more of an identifier (a `'`, `.` and a
letter, a non-ASCII letter) is an error, since where the identifier after `#`
ends, when the word is no token, decides which literal follows),
and symbols one character each, except where a longer table token
could change the lexing that follows: a `'` after `∑`, `⁻¹`, … (`PRIME_TOKENS`:
Mathlib's `∑'`, `⁻¹'`, core's `Σ'`) or `'` (`''`) that is no char literal is
part of it, a `'` after `]` always is (core's `]'`), and any other
char literal or comment opener glued to a symbol character that might
continue a token is an error ("ambiguous"). A number after a glued `.` is a
field index (`fieldIdxFn`), digits only; where a numeral would read further,
the glued text must hold no mark and no literal opener. Characters whose
reading changed between Lean versions (Latin-1 and Latin Extended-A letters,
`ⱼ`) are an error outside literals.

Python, with the character classes and the runs read by them (spaces and
line comments, identifier parts, a run of text with no literal or comment
opener) in core.lexchars, whose twin is C (native/lexchars.pyx). setup.py
also compiles this file unchanged with Cython as core.lexing_c, where
core/lexing_c.pxd makes `Lexer` a C-level class (typed fields, methods called
through its C table; the first line's directive leaves the annotations to
that file); core.lexer, the module every reader imports, picks that build:
the policy's budget per snippet is a few tens of microseconds. A second, independent
transliteration used only by the fuzzer lives in
tests/policy/lean_reference.py.

Why one room: it is one port of one Lean function family (`tokenFnAux` and
the readers it dispatches to call each other, and share one state: the
tokens so far, the caller's marks, where the last plain run ended, which the
string, field-index and glued-symbol rules all read); the literal readers
that need no state are already apart (core.literals).
May import: leanrpc.core.literals (the literal readers), leanrpc.core.lexchars
(the character classes and their runs).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .lexchars import id_first, ident_end, ident_error, plain_end, space_end, versioned
from .literals import LexError, char_literal_end, escape_end, number_end, plain_string_end

__all__ = ["Token", "LexError", "Lexer", "lex", "ident_name", "line_col", "comment_end"]

IDENT, SYMBOL, HASH, NUM, STR, CHAR, NAME, RAW, DOC, PIECE = (
    "ident",
    "symbol",
    "hash",  # `#` and the identifier characters glued after it (the policy decides)
    "num",
    "str",
    "char",
    "name",
    "raw",
    "doc",
    "piece",  # a literal part of an interpolated string; the holes are tokens
)


class Token(NamedTuple):
    kind: str
    start: int
    end: int


# Token(kind, start, end) without the Python-level `__new__` NamedTuple
# generates: the lexer makes one per token, on every snippet.
_token = tuple.__new__


_DIGIT_RUN = re.compile("[0-9]+")
_GLUED = re.compile(r"[^ \n\t\r]*")
_OPENERS = re.compile("[\"'«`]|--|/-")
_HASH_WORD = re.compile("[A-Za-z0-9_!?]*")
_COMMENT_MARK = re.compile(r"/-|-/")
_PIECE_BODY = re.compile(r'[^"\\{]*')
_RAW_OPEN = re.compile(r'r(#*)"')
# Symbol characters that no multi-character token continues through a `'`,
# `--` or `/-` (brackets and separators): a char literal or comment glued
# after any other symbol character could be part of a longer token.
_SAFE_BEFORE = frozenset("()[]{}⟨⟩,;")
# After these, no parser takes an interpolated string (they end operators or
# open a bracket): a string with a `{` there is read plainly.
_PLAIN_AFTER = frozenset("=:,([{⟨+-*/<>≤≥≠∧∨¬↔→←∘|$^•∣∈∉⊆⊂∪∩×")


def comment_end(text: str, start: int, pos: int) -> int:
    """`finishCommentBlock 1` from `pos`, for the comment opened at `start`:
    just past its closing `-/` (comments nest); LexError if unterminated."""
    depth = 1
    for mark in _COMMENT_MARK.finditer(text, pos):
        depth += 1 if mark.group() == "/-" else -1
        if depth == 0:
            return mark.end()
    raise LexError("an unterminated comment", start)


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and 0-based column (Lean's convention) of `offset`."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1)


def ident_name(text: str, token: Token) -> str:
    """The dotted name an identifier (or name literal) spells, `«»` removed."""
    raw = text[token.start : token.end].lstrip("`")
    return raw.replace("«", "").replace("»", "") if "«" in raw else raw


def lex(text: str) -> list[Token]:
    """Every token of `text` in order (comments and whitespace left out), or
    LexError at the first place Lean's reading is an error or not certain."""
    lexer = Lexer(text)
    lexer.fill(len(text))
    return lexer.out


class Lexer:
    """Lexes `text` lazily: `fill(offset)` reads on until a token starts at
    or after `offset` (or the text ends); `out` holds the tokens read so far."""

    __slots__ = ("text", "n", "out", "pos", "marks", "mark", "run_end", "after_hole")

    def __init__(self, text: str, marks: list[int] | None = None) -> None:
        self.text = text
        self.n = len(text)
        self.out: list[Token] = []
        self.pos = 0
        # Offsets the caller needs tokens at, sorted: with marks, a run of
        # text before the next mark that holds no literal or comment opener
        # (core.lexchars.plain_end) is passed over at once, up to its last space
        # (a token boundary in every reading), and its tokens are not
        # emitted. Without marks every token is emitted.
        self.marks = marks
        self.mark = 0
        self.run_end = -1  # where the last run of plain tokens ended (spaces included)
        # Where a piece after a hole starts (its `}`), in strings an interpolating parser
        # may read (string()).
        self.after_hole: list[int] = []

    def fill(self, offset: int) -> None:
        out, n = self.out, self.n
        while self.pos < n and (not out or out[-1].start < offset):
            self.step(skip=True)

    def step(self, skip: bool) -> None:
        """Reads one token (after a run of plain ones when `skip`)."""
        pos, text = self.pos, self.text
        marks = self.marks
        if skip and marks is not None:
            k = self.mark
            while k < len(marks) and marks[k] < pos:
                k += 1
            self.mark = k
            limit = marks[k] if k < len(marks) else self.n
            # A `'` glued to the token before is no prime (an identifier's
            # primes are its own): a char literal, or part of a symbol token.
            if limit > pos and text[pos] != "'":
                end = plain_end(text, pos, limit)
                cut = max(text.rfind(" ", pos, end), text.rfind("\n", pos, end)) + 1
                if cut > pos:
                    pos = self.run_end = cut
        pos = self.whitespace(pos)
        if pos < self.n:
            pos = self.token(pos, text[pos])
        self.pos = pos

    def get(self, i: int, exact: bool = False) -> Token | None:
        """Token `i` of those emitted, reading on as needed (every token from
        here when `exact`, for a construct's next tokens); None past the end."""
        out = self.out
        while i >= len(out) and self.pos < self.n:
            self.step(skip=not exact)
        return out[i] if i < len(out) else None

    def tokens(self, pos: int, hole: bool) -> int:
        """Tokens from `pos` to the end, or (in an interpolation hole) to the
        `}` that closes it, whose offset is returned."""
        text, n = self.text, self.n
        depth = 0
        while True:
            pos = self.whitespace(pos)
            if pos >= n:
                if hole:
                    raise LexError("an unterminated interpolated string", pos)
                return pos
            c = text[pos]
            if hole and c in "{}":
                if c == "}" and depth == 0:
                    return pos
                depth += 1 if c == "{" else -1
            pos = self.token(pos, c)

    def whitespace(self, pos: int) -> int:
        """Lean's `whitespace`: spaces, newlines, line and block comments."""
        text = self.text
        while True:
            pos = space_end(text, pos)
            if pos >= self.n:
                return pos
            c = text[pos]
            if (
                c == "/"
                and text.startswith("/-", pos)
                and text[pos + 2 : pos + 3] not in ("-", "!")
            ):
                pos = self.comment_end(pos, pos + 2)
                continue
            if c == "\t":
                raise LexError("a tab (Lean refuses tabs)", pos)
            if c == "\r":
                raise LexError("an isolated carriage return", pos)
            return pos

    def comment_end(self, start: int, pos: int) -> int:
        return comment_end(self.text, start, pos)

    def emit(self, kind: str, start: int, end: int) -> int:
        self.out.append(_token(Token, (kind, start, end)))
        return end

    def token(self, pos: int, c: str) -> int:
        """`tokenFnAux` at `pos` (whitespace already skipped)."""
        text = self.text
        if c == '"':
            return self.string(pos)
        if c == "'" and text[pos + 1 : pos + 2] != "'":
            return self.char(pos)
        if "0" <= c <= "9":
            out = self.out
            if (
                len(out) > 1
                and out[-1].end == pos
                and text[out[-1].start] == "."
                and out[-2].end == out[-1].start
            ):
                # `p.2.1`: the term parser reads a field index (`fieldIdxFn`), digits only
                return self.emit(NUM, pos, self.field_index_end(pos))
            return self.emit(NUM, pos, number_end(text, pos))
        if c == "`" and pos + 1 < self.n and (text[pos + 1] == "«" or id_first(text, pos + 1)):
            return self.emit(NAME, pos, self.ident_end(pos + 1))
        if c == "r":
            raw = _RAW_OPEN.match(text, pos)
            if raw is not None:  # rawStrLitFnAux
                close = '"' + raw.group(1)
                found = text.find(close, raw.end())
                if found < 0:
                    raise LexError("an unterminated raw string literal", pos)
                return self.emit(RAW, pos, found + len(close))
        if c == "«" or id_first(text, pos):
            return self.emit(IDENT, pos, self.ident_end(pos))
        if c == "/" and text.startswith("/-", pos):
            # `/--` or `/-!`: a token, then `whitespace`, then the body
            # (`commentBody` = finishCommentBlock 1): one `doc` token.
            return self.emit(DOC, pos, self.comment_end(pos, self.whitespace(pos + 3)))
        if versioned(text, pos):
            raise LexError(f"the character {c!r}, read differently by Lean versions", pos)
        return self.symbol(pos, c)

    def field_index_end(self, pos: int) -> int:
        """`fieldIdxFn` after a glued `.`. Where a numeral would read further
        (`p.2.1`, `x.5e3elab`: whether the parser takes a field index is its
        call), the two readings may split the glued text differently: that is
        fine only when it holds no mark and nothing that opens a literal."""
        text = self.text
        end = _DIGIT_RUN.match(text, pos).end()
        try:
            longer = number_end(text, pos)
        except LexError:
            longer = -1
        if longer != end:
            stop = _GLUED.match(text, pos).end()
            marks = self.marks or ()
            if any(pos <= m < stop for m in marks) or _OPENERS.search(text, pos, stop):
                raise LexError("a field index glued to text a numeral would read otherwise", pos)
        return end

    def ident_end(self, pos: int) -> int:
        """`identFnAux`: parts (`«…»` or isIdFirst isIdRest*) joined by `.`
        (core.lexchars.ident_end); LexError where it cannot be read."""
        end = ident_end(self.text, pos)
        if end < 0:
            raise LexError(ident_error(self.text, -2 - end), -2 - end)
        return end

    def symbol(self, pos: int, c: str) -> int:
        """One symbol character (the token table's longest match is not known
        here). What follows it is read as Lean reads it after a one-character
        token, unless a longer token could change that reading: then a
        known token (`∑'`, `⁻¹'`) or an error."""
        text = self.text
        end = pos + 1
        if c == "#":
            # A lowercase word after `#` may be a command (`#eval`, `#check`):
            # the whole ASCII word is one `hash` token, and the policy allows
            # it only when it is exactly a read-only command (Lean's longest
            # match would take a command prefix of it). One lowercase letter
            # is no command (no token of Lean's or Mathlib's table is `#` and
            # one letter): Lean's longest match is `#` (or `#v[`), and the
            # letter starts the next token, an identifier (Mathlib's `#s`,
            # `#s'`) or a raw string (`#r"…"`), read here as Lean reads it.
            # Anything else (`#[`, `#S`, `#1`) is `#` alone, then a token start.
            nxt = text[end : end + 1]
            if nxt == "_" or "a" <= nxt <= "z":
                word_end = _HASH_WORD.match(text, end).end()
                if word_end > end + 1 or nxt == "_":
                    if ident_end(text, end) != word_end:
                        # Where the word is a token, it ends here; where it is not (its
                        # command not imported), `#` and an identifier that reads on
                        # (`#check'"'`: a prime; `#norm_num.r#"`: `.r`), so what follows
                        # (a char literal, a raw string) depends on the token table.
                        raise LexError(
                            "a `#`-word glued to more of a name (table-dependent)", word_end
                        )
                    return self.emit(HASH, pos, word_end)
            return self.emit(HASH, pos, end)
        if c == "'":  # `''` (Mathlib's image): not a char literal (tokenFnAux)
            return self.emit(SYMBOL, pos, end + 1 if text[end : end + 1] == "'" else end)
        if c == "]" and text[end : end + 1] == "'":
            # `]'` is a token of core Lean (`xs[i]'h`, Init/GetElem.lean):
            # by the longest match a `'` after `]` is never a char literal.
            return self.emit(SYMBOL, pos, end + 1)
        if c in _SAFE_BEFORE:
            return self.emit(SYMBOL, pos, end)
        nxt = text[end : end + 2]
        if nxt[:1] == "'":
            glued = [t for t in PRIME_TOKENS if text.startswith(t, end + 1 - len(t))]
            if glued and char_literal_end(text, end) is None:
                return self.emit(SYMBOL, pos, end + 1)
            raise LexError("a char literal glued to a symbol that may be a longer token", end)
        if nxt in ("--", "/-"):
            raise LexError("a comment glued to a symbol that may be a longer token", end)
        return self.emit(SYMBOL, pos, end)

    def char(self, pos: int) -> int:
        end = char_literal_end(self.text, pos)
        if end is None:
            raise LexError("a malformed character literal", pos)
        return self.emit(CHAR, pos, end)

    def string(self, pos: int) -> int:
        """`strLitFnAux`, and the `interpolatedStr` reading where they may differ."""
        plain_end = plain_string_end(self.text, pos)
        if self.text.find("{", pos, plain_end) < 0:
            return self.emit(STR, pos, plain_end)
        mark = len(self.out)
        try:
            interp_end = self.interpolated(pos)
        except LexError:
            interp_end = -1
        if interp_end == plain_end:
            # Both readings agree: pieces and hole tokens emitted. Where an interpolating
            # parser may read it, the pieces after a hole are `after_hole`: should a hole
            # not parse, Lean's recovery reads on from inside the string.
            if not self.plain_context(mark, pos):
                self.after_hole.extend(
                    t.start
                    for t in self.out[mark:]
                    if t.kind == PIECE and self.text[t.start] == "}"
                )
            return plain_end
        del self.out[mark:]
        if self.plain_context(mark, pos):
            return self.emit(STR, pos, plain_end)
        raise LexError(
            "a string literal whose end depends on whether it is interpolated (a quote in a `{…}`)",
            pos,
        )

    def plain_context(self, mark: int, pos: int) -> bool:
        """Whether the token before the string at `pos` is one no
        interpolating parser follows (a one-character operator or opener)."""
        text = self.text
        last = self.out[mark - 1] if mark else None
        if self.run_end > (last.end if last else -1):  # it ended a run of plain tokens
            if text[self.run_end : pos].strip(" \n"):
                return False  # a comment in between: not worth reading back
            tail = text[: self.run_end].rstrip(" \n")
            return bool(tail) and tail[-1] in _PLAIN_AFTER
        return (
            last is not None
            and last.kind == SYMBOL
            and last.end - last.start == 1
            and text[last.start] in _PLAIN_AFTER
        )

    def interpolated(self, pos: int) -> int:
        """`interpolatedStrFn`: pieces and `{term}` holes; the end offset."""
        text, n = self.text, self.n
        piece = pos
        pos += 1
        while True:
            pos = _PIECE_BODY.match(text, pos).end()
            if pos >= n:
                raise LexError("an unterminated string literal", piece)
            c = text[pos]
            if c == '"':
                self.emit(PIECE, piece, pos + 1)
                return pos + 1
            if c == "\\":
                pos = escape_end(text, pos, in_string=True, braces=True)
                continue
            self.emit(PIECE, piece, pos + 1)  # `{`: a hole, lexed as tokens up to its `}`
            piece = self.tokens(pos + 1, hole=True)
            pos = piece + 1


# Tokens of Lean's and Mathlib's tables that end in a `'` after a symbol
# character (tsum, tprod, preimage; core's `Σ'`, `×'`, `⊕'`; Mathlib's
# model-theory `∀'`, `∃'`, found scanning real files): the `'` is theirs,
# not a char literal.
PRIME_TOKENS = ("∑'", "∏'", "⁻¹'", "Σ'", "×'", "⊕'", "∀'", "∃'")
