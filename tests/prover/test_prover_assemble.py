"""Whole-proof text: bare statements closed with `by sorry`, tactic paths put in place of a sorry."""

from __future__ import annotations

import pytest

from leanrpc.errors import RequestError
from leanrpc.services.prover.assemble import assemble, has_sorry, prepare_code


def test_sorry_detection_ignores_comments_strings_and_longer_names():
    assert has_sorry("theorem t : p := by sorry")
    assert not has_sorry("theorem t : p := by exact sorryAx _ -- sorry\n/- sorry -/")
    assert not has_sorry('#eval "sorry"')


def test_bare_statement_is_closed_and_a_proof_without_sorry_refused():
    assert prepare_code("theorem t : 1 = 1", "theorem t : 1 = 1").endswith(":= by sorry\n")
    with pytest.raises(RequestError, match="no `sorry`"):
        prepare_code("theorem t : 1 = 1 := rfl", "theorem t : 1 = 1 := rfl")


def test_tactic_sorry_is_replaced_at_its_column():
    code = "theorem t : p ∧ q := by\n  sorry\n"
    assert assemble(code, (2, 2), (2, 7), ("constructor", "exact hp")) == (
        "theorem t : p ∧ q := by\n  constructor\n  exact hp\n"
    )


def test_term_sorry_becomes_a_by_block_and_multiline_tactics_keep_their_shape():
    code = "theorem t : p := sorry"
    out = assemble(code, (1, 17), (1, 22), ("have h : p := by\n  exact hp", "exact h"))
    assert out == "theorem t : p := by\n  have h : p := by\n    exact hp\n  exact h"
