"""benchmarks/batch_cpu: every checkout runs every shape, alternating, with the checks asked."""

from __future__ import annotations

import pytest

from benchmarks import batch_cpu


def test_each_round_runs_every_shape_on_every_checkout_alternating(monkeypatch, tmp_path, capsys):
    seen = []

    def fake_run_one(name, checkout, shape, args, out):
        seen.append((name, shape, args.checks))
        return {
            "variant": name,
            "shape": shape,
            "server_cpu_ms": 1.0,
            "req_per_s": 2.0,
            "valid": 3,
            "requests": 3,
            "foreign_load_pct": 0.0,
        }

    monkeypatch.setattr(batch_cpu, "run_one", fake_run_one)
    argv = ["--checkout", f"a={tmp_path}", "--checkout", f"b={tmp_path}", "--rounds", "2"]
    assert batch_cpu.main(argv) == 0
    assert seen == [
        ("a", "unary", "default"),
        ("b", "unary", "default"),
        ("a", "batch:16", "default"),
        ("b", "batch:16", "default"),
        ("b", "unary", "default"),
        ("a", "unary", "default"),
        ("b", "batch:16", "default"),
        ("a", "batch:16", "default"),
    ]
    assert "| 2 | a | batch:16 | 3/3 |" in capsys.readouterr().out


def test_a_checkout_without_a_name_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        batch_cpu.main(["--checkout", str(tmp_path)])
