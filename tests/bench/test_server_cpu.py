"""benchmarks/server_cpu.py runs end to end on the stand-in: every snippet of
the round answered VALID, a server CPU figure per request, unary and stream
(its size is the benchmark's business, not this test's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks.config import REPO


def _server_cpu(requests: int, rpc: str, *extra: str) -> subprocess.CompletedProcess:
    """One small round of `benchmarks.server_cpu` on one worker; it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.server_cpu", "--requests", str(requests)]
        + ["--workers", "1", "--rounds", "1", "--idle", "0", "--scale", "0.002"]
        + ["--rpc", rpc, *extra],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.mark.parametrize("rpc", ["unary", "stream", "batch"])
def test_server_cpu_measures_a_round(tmp_path, rpc):
    out = tmp_path / "cpu.json"
    done = _server_cpu(6, rpc, "--set", "repl.fence_audit=auto", "--json", str(out))
    [row] = json.loads(out.read_text())["rounds"]
    assert row["requests"] == row["valid"] == 6 and row["rpc"] == rpc
    # A figure, never missing; 6 requests may read 0: the kernel counts a process's CPU in
    # clock ticks (10 ms), and a fast machine serves them within one (failed so on a CI run).
    assert row["server_cpu_ms_per_request"] >= 0
    # The server's main thread slept between calls and was woken for each (its voluntary
    # context switches): a count, never missing.
    assert row["wakeups_per_request"] > 0
    assert "server CPU ms/request" in done.stdout


def test_server_cpu_pins_each_snippet_to_its_own_statement(tmp_path):
    """`--pin`: every snippet carries its own statement as its reference, and a round
    counts a snippet only when it is VALID and passed that check."""
    out = tmp_path / "cpu.json"
    _server_cpu(6, "batch", "--batch", "3", "--checks", "default", "--pin", "--json", str(out))
    [row] = json.loads(out.read_text())["rounds"]
    assert row["pinned"] == row["requests"] == row["valid"] == 6, row


def test_server_cpu_cprofile_holds_the_measured_requests(tmp_path):
    """`--cprofile FILE`: the server ran under cProfile (benchmarks.cprofile_serve), and the
    stats it wrote after the rounds hold the request path (the resolver ran once per
    measured request: the warm-up's requests were sent before profiling started)."""
    import pstats

    prof = tmp_path / "serve.prof"
    _server_cpu(5, "unary", "--concurrency", "1", "--cprofile", str(prof))
    stats = pstats.Stats(str(prof)).stats
    calls = {
        name: entry[1]
        for (path, _line, name), entry in stats.items()
        if path.endswith("services/resolve.py")
    }
    assert calls.get("resolve") == 5, calls


def test_server_cpu_waiting_holds_every_worker_for_the_window(tmp_path):
    """`--waiting S`: the rate is measured while the held commands are still unanswered
    (none of them came back inside the window), and is reported as a number."""
    out = tmp_path / "cpu.json"
    _server_cpu(2, "unary", "--waiting", "1.5", "--json", str(out))
    report = json.loads(out.read_text())
    assert report["waiting_answered"] == 0
    assert report["waiting_ms_per_s"] >= 0
