"""The compiled builds of the one lexer and the policy's rules
(leanrpc.core.lexing_c and leanrpc.policy.reading_c: setup.py compiles
core/lexing.py and policy/reading.py unchanged with Cython) read exactly as
their interpreted source does: the same tokens, the same lexing errors (reason
and offset), the same marked reading and the same verdicts, on the 805 real
proofs and on the lexer fuzzer's token soups; and the facades load them."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from leanrpc.core import lexer, lexing, lexing_c
from leanrpc.core._impl import extensions_disabled
from leanrpc.policy import reading, reading_c
from testkit import real_proofs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "policy"))
from test_lexer_fuzz import PIECES  # noqa: E402  (the fuzzer's own pieces)

# The module: the package re-exports `scan`, the function, under the same name.
scan_facade = importlib.import_module("leanrpc.policy.scan")


def _tokens(build, text: str):
    """Every token as plain tuples, or the error's reason and offset."""
    try:
        return [tuple(token) for token in build.lex(text)]
    except build.LexError as error:
        return ("error", error.reason, error.offset)


def _marked(build, text: str, marks: list[int]):
    """What a lexer with marks emits (the policy's way of reading)."""
    lexer_ = build.Lexer(text, marks)
    try:
        lexer_.fill(len(text))
    except build.LexError as error:
        return ("error", error.reason, error.offset)
    return [tuple(token) for token in lexer_.out]


def _same(text: str) -> None:
    assert _tokens(lexing_c, text) == _tokens(lexing, text)
    marks = [i for i in range(0, len(text), 11)]
    assert _marked(lexing_c, text, marks) == _marked(lexing, text, marks)
    # Two classes of one source: compared field by field.
    assert dataclasses.astuple(reading_c.scan(text)) == dataclasses.astuple(reading.scan(text))


def test_the_same_on_every_real_proof():
    for _name, text in real_proofs():
        _same(text)


@seed(43)
@settings(
    max_examples=1500,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=24).map("".join))
def test_the_same_on_token_soups(text):
    _same(text)


def test_the_facades_load_the_compiled_builds():
    if extensions_disabled():
        assert lexer.IMPLEMENTATION == "python" and lexer.Lexer is lexing.Lexer
        assert scan_facade.IMPLEMENTATION == "python" and scan_facade.scan is reading.scan
    else:
        assert lexer.IMPLEMENTATION == "compiled" and lexer.Lexer is lexing_c.Lexer
        assert scan_facade.IMPLEMENTATION == "compiled" and scan_facade.scan is reading_c.scan
        assert type(lexing_c.lex).__name__ != "function"  # compiled, not the source reloaded
