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


def test_summarize_nine_metrics_on_a_constructed_run():
    """Each of the nine definitions checked on a run whose values are known by hand."""
    ok = "theorem t : 1 = 1 := by sorry"
    runs = [
        # p1: solved at iteration 2 (first run)
        RunRecord(
            "p1",
            0,
            Outcome(OutcomeStatus.FORMALIZED, 2, ok, generated_tokens=30),
            [_cand(1, True, Status.INVALID, "unknown_ident"), _cand(2, True, Status.SORRY)],
        ),
        # p2: first run exhausted (last checked error: syntax); a second sample solved it
        RunRecord(
            "p2",
            0,
            Outcome(OutcomeStatus.EXHAUSTED, 2, generated_tokens=20),
            [_cand(1, False), _cand(2, True, Status.INVALID, "syntax")],
        ),
        RunRecord(
            "p2",
            1,
            Outcome(OutcomeStatus.FORMALIZED, 1, ok, generated_tokens=10),
            [_cand(1, True, Status.SORRY)],
        ),
        # p3: solved at iteration 1
        RunRecord(
            "p3", 0, Outcome(OutcomeStatus.FORMALIZED, 1, ok), [_cand(1, True, Status.SORRY)]
        ),
        # p4: unsolved, nothing reached Lean (ill-formed only) -> other
        RunRecord("p4", 0, Outcome(OutcomeStatus.EXHAUSTED, 1), [_cand(1, False)]),
        # p5: unsolved, typeclass at iteration 1, then type_mismatch last -> type_mismatch
        RunRecord(
            "p5",
            0,
            Outcome(OutcomeStatus.EXHAUSTED, 2),
            [
                _cand(1, True, Status.INVALID, "typeclass"),
                _cand(2, True, Status.INVALID, "type_mismatch"),
            ],
        ),
    ]
    refs = {
        "p1": ok,
        "p2": "theorem u : 2 = 2 := by sorry",
        "p3": "theorem v (x : ℕ) : x + 0 = x := by sorry",
        "p4": ok,
        "p5": ok,
    }
    s = summarize(
        runs,
        refs,
        samples=2,
        max_iterations=2,
        goal_matches={"p1": True, "p3": False, "p2": True},
        generated_tokens=120,
        wall_s=4.0,
        gpu={"available": True, "peak_vram_bytes": 123, "gpu_util_percent": 55.5},
    )
    assert s["problems"] == 5 and s["candidates"] == 9
    # 1. well_formed: 7 of 9 candidates pass the static checks
    assert s["well_formed"] == pytest.approx(7 / 9)
    # 2. compile@k over the first runs: p3 at 1, p1 at 2; 5 problems
    assert [s[f"compile@{k}"] for k in range(1, 6)] == [0.2, 0.4, 0.4, 0.4, 0.4]
    # 3. pass@N with the iteration cap N = 2: compiled within 2 iterations (first run)
    assert s["pass@2"] == 0.4 and "pass@5" not in s
    assert s["any_sample@2"] == 0.6  # the old "any of N samples" stands beside it
    # 4. mean_iters_solved over solved problems (first run): (2 + 1) / 2
    assert s["mean_iters_solved"] == 1.5
    # 5. faithfulness_code over solved problems: p1 identical, p3 against its reference
    assert s["faithfulness_code"] == pytest.approx((1.0 + faithfulness(ok, refs["p3"])) / 2)
    # 6. goal_exact_match over solved problems (p2's first run is unsolved: not counted)
    assert s["goal_exact_match"] == 0.5
    # 7. error_breakdown over the 3 UNSOLVED problems, the last error Lean reported
    assert s["error_breakdown"] == {
        "unknown_ident": 0,
        "syntax": 1,
        "typeclass": 0,
        "type_mismatch": 1,
        "other": 1,
    }
    assert sum(s["error_breakdown"].values()) == 3
    # 8. tokens_per_sec
    assert s["tokens_per_sec"] == 30.0
    # 9. peak VRAM and GPU utilisation as measured
    assert s["peak_vram_bytes"] == 123 and s["gpu_util_percent"] == 55.5
    assert s["error_breakdown_per_iteration"] == {
        "1": {"unknown_ident": 1, "typeclass": 1},
        "2": {"syntax": 1, "type_mismatch": 1},
    }


def test_summarize_without_gpu_or_repl_reports_none_not_zero():
    run = RunRecord(
        "p", 0, Outcome(OutcomeStatus.FORMALIZED, 1, "theorem t : 1 = 1 := by sorry"), []
    )
    s = summarize([run], {"p": "theorem t : 1 = 1 := by sorry"}, samples=1)
    assert s["goal_exact_match"] is None and s["tokens_per_sec"] is None
    assert s["peak_vram_bytes"] is None and s["gpu_util_percent"] is None
    assert s["gpu"]["available"] is False


def test_gpu_monitor_without_a_gpu_says_so():
    from leanrpc.formalize.gpumon import GpuMonitor

    report = GpuMonitor().start().stop()
    assert report["available"] is False and report["reason"]
    assert report["peak_vram_bytes"] is None and report["gpu_util_percent"] is None


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
    assert s["faithfulness_code"] == 1.0 and s["mean_iters_solved"] == 2.0
