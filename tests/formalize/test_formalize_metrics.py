"""Evaluation metrics and the evaluation harness (oracle generator, stand-in verifier)."""

import json
import pathlib
import subprocess
import sys

import pytest

from leanrpc.formalize.metrics import RunRecord, canonical, faithfulness, summarize
from leanrpc.formalize.types import Candidate, Outcome, OutcomeStatus
from leanrpc.formalize.wellformed import check
from leanrpc.results import Status, VerifyResult

ROOT = pathlib.Path(__file__).resolve().parents[2]

REF = (
    "theorem amc12a_2019_p21 (z : ℂ) (h₀ : z = (1 + Complex.I) / Real.sqrt 2) :\n"
    "  ((∑ k : ℤ in Finset.Icc 1 12, z ^ k ^ 2) * (∑ k : ℤ in Finset.Icc 1 12, 1 / z ^ k ^ 2)) = 36 := by\n"
)


def test_canonical_ignores_style():
    restyled = (
        "theorem my_name (z : ℂ) (hz : z = (1+Complex.I)/Real.sqrt 2) : "
        "((∑ k : ℤ ∈ Finset.Icc 1 12, z^k^2) * (∑ k : ℤ ∈ Finset.Icc 1 12, 1/z^k^2)) = 36 := by sorry"
    )
    assert canonical(REF) == canonical(restyled)
    assert faithfulness(REF, restyled) == 1.0
    assert (
        canonical("theorem t {G : Type*} [Group G] (h : a = b) : a = b := by\n  sorry -- x")
        == "{G:Type*}[Group G](_:a=b):a=b"
    )
    assert 0.1 < faithfulness(REF, "theorem x (z : ℂ) : z = 36 := by sorry") < 0.5


def _cand(it, ok=True, status=None, cat=None):
    stmt = "theorem t : 1 = 1 := by sorry" if ok else "nope"
    vr = VerifyResult(id="", status=status) if status else None
    return Candidate(it, stmt, check(stmt), vr, error_category=cat)


def test_summarize():
    runs = [
        # p1: solved at iteration 2 on the first sample
        RunRecord(
            "p1",
            0,
            Outcome(OutcomeStatus.FORMALIZED, 2, "theorem t : 1 = 1 := by sorry"),
            [_cand(1, True, Status.INVALID, "unknown_ident"), _cand(2, True, Status.SORRY)],
        ),
        # p2: first sample exhausted, second solved at 1
        RunRecord(
            "p2",
            0,
            Outcome(OutcomeStatus.EXHAUSTED, 2),
            [_cand(1, False), _cand(2, True, Status.INVALID, "syntax")],
        ),
        RunRecord(
            "p2",
            1,
            Outcome(OutcomeStatus.FORMALIZED, 1, "theorem t : 1 = 1 := by sorry"),
            [_cand(1, True, Status.SORRY)],
        ),
    ]
    refs = {"p1": "theorem t : 1 = 1 := by sorry", "p2": "theorem u : 2 = 2 := by sorry"}
    s = summarize(runs, refs, samples=2)
    assert s["problems"] == 2 and s["candidates"] == 5
    assert s["compile@1"] == 0.0 and s["compile@2"] == 0.5 and s["compile@5"] == 0.5
    assert s["pass@2"] == 1.0
    assert s["mean_iters_solved"] == 1.5
    assert s["well_formed"] == pytest.approx(4 / 5) and s["well_formed_first"] == pytest.approx(
        2 / 3
    )
    assert s["error_breakdown"] == {
        "unknown_ident": 1,
        "syntax": 1,
        "typeclass": 0,
        "type_mismatch": 0,
        "other": 0,
    }
    assert s["error_breakdown_per_iteration"] == {"1": {"unknown_ident": 1}, "2": {"syntax": 1}}
    assert s["faithfulness"] == pytest.approx((1.0 + faithfulness(refs["p2"], refs["p1"])) / 2)
    assert s["outcomes"] == {"FORMALIZED": 2, "EXHAUSTED": 1}


def test_eval_harness_oracle_repair(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "formalize_eval.py"),
            "--dataset",
            "proofnet-verified",
            "--limit",
            "3",
            "--generator",
            "oracle-repair",
            "--verify",
            "standin",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = json.loads(out.read_text())
    assert s["problems"] == 3 and s["compile@1"] == 0.0 and s["compile@2"] == 1.0
    assert s["faithfulness"] == 1.0 and s["mean_iters_solved"] == 2.0
