"""The reuse benchmark's quick mode runs and reports every workload and mode (not speed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "reuse_bench.py"


def _load():
    spec = importlib.util.spec_from_file_location("reuse_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_mode_structure(tmp_path):
    bench = _load()
    out = tmp_path / "r.json"
    # smaller than --quick itself: this checks the structure, not the speed
    report = bench.main(
        [
            "--quick",
            "--only",
            "edit",
            "grpo",
            "--cost-per-kchar",
            "0.01",
            "--import-cost",
            "0.05",
            "--json",
            str(out),
        ]
    )
    assert out.exists() and set(report) >= {"command", "machine", "date", "settings", "workloads"}
    assert set(report["workloads"]) == {"edit", "grpo"}
    for row in report["workloads"].values():
        assert set(bench.MODES) <= set(row)
        assert row["off"]["reused_requests"] == 0, "reuse off never reports a reused prefix"
        assert row["trie"]["reused_requests"] >= row["trie"]["requests"] - 4
        assert row["trie"]["elaborated_chars"] < row["off"]["elaborated_chars"] / 3
        assert row["speedup_vs_off"] > 0 and row["speedup_vs_no_trie"] > 0
