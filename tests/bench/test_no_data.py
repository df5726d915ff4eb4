"""Every benchmark stops with one clear line and a non-zero exit when it has no data
(issue 28 item 6): search_bench, the load harness, the LeanInteract runners, and
search_tree honours $LEANRPC_SHARED."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks import search_tree, workloads
from benchmarks.config import REPO
from benchmarks.targets.leaninteract_search import run_leaninteract_search


def _run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LEANRPC_SHARED=str(tmp_path / "empty-shared"))
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "args",
    [
        ("benchmarks/search_bench.py", "--statements", "3", "--no-leaninteract"),
        ("benchmarks/search_bench.py", "--statements", "0", "--no-leaninteract"),
        ("-m", "benchmarks.load", "run", "--workload", "minif2f", "--duration", "1"),
        (
            "-m",
            "benchmarks.load",
            "run",
            "--workload",
            "kimina",
            "--duration",
            "1",
            "--target",
            "leaninteract",
        ),
        ("-m", "benchmarks.reference_bench"),
        ("-m", "benchmarks.server_cpu", "--requests", "3"),
    ],
)
def test_a_benchmark_without_data_stops_with_one_line(tmp_path, args):
    done = _run(tmp_path, *args)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    # No data at all, or (the load harness) no shared/ folder where LEANRPC_SHARED points: one line.
    assert len(lines) == 1 and lines[0].startswith(
        ("benchmark stopped: no data:", "benchmarks.load run: error:")
    ), done.stderr[-2000:]
    assert "Traceback" not in done.stderr and done.stdout.strip() == ""


def test_search_tree_reads_statements_under_leanrpc_shared(tmp_path, monkeypatch):
    folder = tmp_path.joinpath("elsewhere", *search_tree.DATASET)
    folder.mkdir(parents=True)
    (folder / "b_two.lean").write_text("theorem b : 2 = 2 := by sorry\n")
    (folder / "a_one.lean").write_text("theorem a : 1 = 1 := by sorry\n")
    monkeypatch.setenv("LEANRPC_SHARED", str(tmp_path / "elsewhere"))
    assert search_tree.statements(5) == [
        ("a_one", "theorem a : 1 = 1 := by sorry\n"),
        ("b_two", "theorem b : 2 = 2 := by sorry\n"),
    ]
    monkeypatch.setenv("LEANRPC_SHARED", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit, match="no data: .*nowhere"):
        search_tree.statements(5)


def test_the_leaninteract_search_target_refuses_no_statements_before_starting_anything():
    with pytest.raises(SystemExit, match="no data: 0 statements for the LeanInteract search"):
        run_leaninteract_search([], 1, width=4, max_expansions=8)


def test_the_peers_scripts_stop_with_one_line_on_empty_input(tmp_path):
    """Both peers scripts check their input before importing LeanInteract's REPL (the
    check runs in any interpreter that has psutil; the peers venv is not needed for it)."""
    (tmp_path / "statements.json").write_text(json.dumps([]))
    (tmp_path / "items.jsonl").write_text("")
    for script, args in (
        ("leaninteract_search.py", ["--statements", str(tmp_path / "statements.json")]),
        (
            "leaninteract_runner.py",
            ["--items", str(tmp_path / "items.jsonl"), "--out", str(tmp_path / "out.jsonl")],
        ),
    ):
        probe = (
            "import sys, types, runpy\n"
            # stand-ins for LeanInteract's modules: the scripts stop before using them
            "for name in ('lean_interact', 'lean_interact.interface'):\n"
            "    m = types.ModuleType(name); m.__getattr__ = lambda attr: object; sys.modules[name] = m\n"
            f"sys.argv = [{script!r}] + {args + ['--shim', str(tmp_path), '--work', str(tmp_path)]!r}\n"
            f"runpy.run_path({str(REPO / 'benchmarks' / 'peers' / script)!r}, run_name='__main__')\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120
        )
        lines = done.stderr.strip().splitlines()
        assert (
            done.returncode != 0 and lines and lines[-1].startswith("benchmark stopped: no data:")
        ), (script, done.stderr[-2000:])
        assert "Traceback" not in done.stderr, (script, done.stderr[-2000:])


def test_require_data_passes_data_through():
    assert workloads.require_data([1], "things") == [1]


@pytest.mark.parametrize("module", ["benchmarks.server_cpu", "benchmarks.standin_overhead"])
def test_a_count_below_one_is_one_usage_line(module):
    done = subprocess.run(
        [sys.executable, "-m", module, "--requests", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].endswith("--requests must be at least 1")
    assert "Traceback" not in done.stderr
