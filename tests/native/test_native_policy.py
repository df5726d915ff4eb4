"""Parity of the code policy's needle search: leanrpc._native.policy (compiled)
and leanrpc.core.needles.positions_py (pure) answer the same on the 805 real
proofs, hostile layouts and random text, and the policy runs the native one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from leanrpc._native.policy import positions as native
from leanrpc.core import needles as needle_search
from leanrpc.core._impl import extensions_disabled
from leanrpc.core.needles import positions_py
from leanrpc.policy.scan import CANDIDATES
from testkit import real_proofs


def test_same_offsets_on_every_real_proof():
    for _name, text in real_proofs():
        for needles in (CANDIDATES, ("--", "/-", '"', "«", "'", 'r"', "r#"), ("∑'", "∀x", "a∀")):
            assert native(text, needles) == positions_py(text, needles)
            assert native(text, needles, 200) == positions_py(text, needles, 200)


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="#@[]r'\"«»-/ elabmacrosynun_tive∀ℝé\n", max_size=200),
    st.lists(
        st.text(alphabet="#@[r'\"«-/elab∀é", min_size=1, max_size=4),
        min_size=1,
        max_size=6,
        unique=True,
    ),
    st.one_of(st.none(), st.integers(0, 220)),
)
def test_same_offsets_on_random_text(text, needles, until):
    assert native(text, tuple(needles), until) == positions_py(text, tuple(needles), until)


def test_the_policy_runs_the_compiled_search():
    if extensions_disabled():
        assert needle_search.IMPLEMENTATION == "python"
    else:
        assert needle_search.IMPLEMENTATION == "native" and needle_search.positions is native
