"""Parity of the one lexer's character runs: leanrpc._native.lexchars
(compiled, handed core.lexchars.class_table()) and the `re` readers of
core.lexchars (`*_py`) answer the same on every code point, on hostile
random text and on the 805 real proofs; the lexer runs the compiled ones."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from leanrpc._native import lexchars as native
from leanrpc.core import lexchars
from leanrpc.core._impl import extensions_disabled
from leanrpc.core.lexchars import (
    TABLE_SIZE,
    id_first_py,
    ident_end_py,
    ident_part_end_py,
    plain_end_py,
    space_end_py,
    versioned_py,
)
from testkit import real_proofs

native.set_classes(lexchars.class_table())  # what importing core.lexchars does when enabled


def test_every_code_point_is_classed_alike():
    wrong = []
    for code in [*range(TABLE_SIZE), 0x20000, 0x10FFFF]:
        if 0xD800 <= code <= 0xDFFF:
            continue  # surrogates: no Python str from UTF-8 text holds one
        c = chr(code)
        for text, pos in ((c, 0), ("x" + c, 1)):
            if native.id_first(text, pos) != id_first_py(text, pos):
                wrong.append(("id_first", hex(code)))
            if native.versioned(text, pos) != versioned_py(text, pos):
                wrong.append(("versioned", hex(code)))
        if native.ident_part_end("a" + c, 0) != ident_part_end_py("a" + c, 0):
            wrong.append(("ident_rest", hex(code)))
        if native.plain_end("a" + c + "a", 0, 3) != plain_end_py("a" + c + "a", 0, 3):
            wrong.append(("plain", hex(code)))
        for text in ("a" + c, "a." + c + "b", c + "b"):
            if native.ident_end(text, 0) != _ident_end_py(text, 0):
                wrong.append(("ident_end", hex(code), text))
    assert wrong == []


def test_the_class_table_holds_every_class():
    table = lexchars.class_table()
    assert table[ord("a")] & lexchars.ID_FIRST and table[ord("a")] & lexchars.ID_REST
    assert table[ord("₀")] == lexchars.ID_REST  # a subscript continues a name only
    assert table[ord("-")] == lexchars.PLAIN_STOP  # the escaped `-`, not a range
    assert not table[ord(".")] and not table[ord(",")]  # between ` and / : no range read
    assert table[0x1D49C] & lexchars.ID_FIRST and not table[0x1D5A0]


_ALPHABET = " \n\r\t-/0'\"«»`xXbBoOeE9a_.é×ⱼαℝ₀!?#"


def _ident_end_py(text: str, pos: int) -> int:
    """The pure reader where a caller may call it (an isIdFirst or `«` at pos)."""
    return ident_end_py(text, pos) if pos < len(text) else -2 - pos


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=40), st.integers(0, 42), st.integers(0, 44))
def test_same_runs_on_random_text(text, pos, limit):
    pos = min(pos, len(text))
    assert native.plain_end(text, pos, limit) == plain_end_py(text, pos, limit)
    assert native.space_end(text, pos) == space_end_py(text, pos)
    assert native.ident_part_end(text, pos) == ident_part_end_py(text, pos)
    assert native.id_first(text, pos) == id_first_py(text, pos)
    assert native.versioned(text, pos) == versioned_py(text, pos)
    assert native.ident_end(text, pos) == _ident_end_py(text, pos)


def test_same_runs_on_every_real_proof():
    for _name, text in real_proofs():
        n = len(text)
        for pos in range(0, n, 29):  # every residue of 29 is some token start somewhere
            assert native.plain_end(text, pos, n) == plain_end_py(text, pos, n)
            assert native.plain_end(text, pos, pos + 40) == plain_end_py(text, pos, pos + 40)
            assert native.space_end(text, pos) == space_end_py(text, pos)
            assert native.ident_part_end(text, pos) == ident_part_end_py(text, pos)
            assert native.ident_end(text, pos) == _ident_end_py(text, pos)


def test_the_lexer_runs_the_compiled_runs():
    if extensions_disabled():
        assert lexchars.IMPLEMENTATION == "python" and lexchars.plain_end is plain_end_py
    else:
        assert lexchars.IMPLEMENTATION == "native" and lexchars.plain_end is native.plain_end
        assert lexchars.ident_end is native.ident_end
