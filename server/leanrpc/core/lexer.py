"""The one Lean lexer, as every reader of Lean text imports it.

Owns nothing of its own: it chooses the build of core/lexing.py (Lean's
tokenizer ported; its docstring is the lexer's) that runs. setup.py compiles
that same file with Cython, unchanged (pure-Python mode), as
`leanrpc.core.lexing_c`, with `Lexer` a C-level class declared beside it
(core/lexing_c.pxd): one source, so one reading of Lean, with the
interpreter's per-call overhead gone from the policy's hot path (every
snippet lexes its candidates) and from the axiom plan's mask (every body).
LEANRPC_NO_EXTENSIONS selects the interpreted module (core._impl).
tests/native/test_native_lexing.py holds the two to the same tokens and
errors on the real proofs and on the lexer fuzzer's soups.
May import: core._impl, core.lexing, core.lexing_c (the same source, compiled).
"""

from __future__ import annotations

from ._impl import extensions_disabled

if extensions_disabled():
    from . import lexing as _build

    IMPLEMENTATION = "python"
else:
    from . import lexing_c as _build  # type: ignore[attr-defined]

    IMPLEMENTATION = "compiled"

__all__ = [
    "CHAR",
    "DOC",
    "HASH",
    "IDENT",
    "IMPLEMENTATION",
    "NAME",
    "NUM",
    "PIECE",
    "RAW",
    "STR",
    "SYMBOL",
    "LexError",
    "Lexer",
    "Token",
    "comment_end",
    "ident_name",
    "lex",
    "line_col",
]

IDENT, SYMBOL, HASH, NUM = _build.IDENT, _build.SYMBOL, _build.HASH, _build.NUM
STR, CHAR, NAME, RAW, DOC, PIECE = (
    _build.STR,
    _build.CHAR,
    _build.NAME,
    _build.RAW,
    _build.DOC,
    _build.PIECE,
)
Token = _build.Token
LexError = _build.LexError
Lexer = _build.Lexer
lex = _build.lex
ident_name = _build.ident_name
line_col = _build.line_col
comment_end = _build.comment_end
