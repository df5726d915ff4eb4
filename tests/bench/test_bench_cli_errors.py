"""`python -m benchmarks.load` fails in one line, never a traceback (issue 29
case 10): no shared/ folder (LEANRPC_SHARED unset or wrong), no matplotlib."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks import cli, workloads

REPO = Path(__file__).resolve().parents[2]


def _bench(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.load", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )


def test_run_without_a_shared_folder_is_one_line(tmp_path, monkeypatch, capsys):
    # No LEANRPC_SHARED and no shared/ above the checkout (as in a fresh clone).
    monkeypatch.delenv("LEANRPC_SHARED", raising=False)
    monkeypatch.setattr(
        workloads, "__file__", str(tmp_path / "checkout" / "benchmarks" / "workloads.py")
    )
    assert cli.main(["run", "--workers", "1", "--requests", "2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "benchmarks.load run: error: the project's shared/ folder (datasets/, fixtures/) is not above "
        "this checkout; set LEANRPC_SHARED=/path/to/shared\n"
    )


def test_run_with_a_wrong_shared_folder_is_one_line(tmp_path):
    done = _bench(
        "run", "--workers", "1", "--requests", "2", "--quiet", LEANRPC_SHARED=str(tmp_path)
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"benchmarks.load run: error: LEANRPC_SHARED={tmp_path} has no datasets/ or fixtures/ "
        "folder; point it at the project's shared/ folder\n"
    )


def test_compare_without_matplotlib_keeps_its_json_and_says_so_in_one_line(tmp_path):
    blocker = tmp_path / "block" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text(
        'raise ModuleNotFoundError("No module named \'matplotlib\'", name="matplotlib")\n'
    )
    out = tmp_path / "compare.json"
    done = _bench(
        "compare",
        "--targets",
        "leanrpc",
        "--rounds",
        "1",
        "--requests",
        "4",
        "--workers",
        "1",
        "--quiet",
        "--json",
        str(out),
        "--out-dir",
        str(tmp_path / "plots"),
        PYTHONPATH=os.pathsep.join([str(tmp_path / "block"), os.environ.get("PYTHONPATH", "")]),
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    assert [line for line in done.stderr.splitlines() if "matplotlib" in line] == [
        "plots skipped: matplotlib is not installed (pip install matplotlib, or the test extra: pip install -e '.[test]')"
    ]
    assert json.loads(out.read_text())["kind"] == "compare"
    assert not (tmp_path / "plots").exists() or not list((tmp_path / "plots").iterdir())
