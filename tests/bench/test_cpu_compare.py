"""benchmarks/cpu_compare: both checkouts do the same REPL work. A checkout from before
issue 25 has no `--checks` flag and checks no axioms; the current one checks them by
default, so `--checks off` must reach exactly the checkouts that take it."""

from __future__ import annotations

from pathlib import Path

from benchmarks import cpu_compare

REPO = Path(__file__).resolve().parents[2]


def test_this_checkout_takes_the_checks_flag():
    assert cpu_compare._has_checks_flag(REPO)


def test_an_older_harness_without_the_flag_is_run_without_it(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "cli.py").write_text('p.add_argument("--workers", type=int)\n')
    assert not cpu_compare._has_checks_flag(tmp_path)
    assert not cpu_compare._has_checks_flag(tmp_path / "missing")


def test_checks_default_to_off_for_a_like_for_like_run(monkeypatch, tmp_path):
    seen = []

    def fake_run_one(checkout, args, out):
        seen.append(args.checks)
        return {
            "checkout": str(checkout),
            "rps": 1.0,
            "ratio_to_ideal": 0.5,
            "server_cpu_ms_per_req": 2.0,
            "foreign_load_pct": 0.0,
        }

    monkeypatch.setattr(cpu_compare, "run_one", fake_run_one)
    assert cpu_compare.main([str(tmp_path), str(tmp_path), "--rounds", "1"]) == 0
    assert seen == ["off", "off"]
