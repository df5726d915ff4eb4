"""benchmarks/grpc_floor.py runs end to end: every target answers every call VALID, in
alternating rounds, and each row has a server CPU figure per call (the bare servers'
floor next to leanrpc serve on the stand-in)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarks.config import REPO


def _run(tmp_path, *extra: str, env=None) -> tuple[subprocess.CompletedProcess, list[dict]]:
    out = tmp_path / "floor.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.grpc_floor",
            "--calls",
            "6",
            "--rounds",
            "2",
            "--delay",
            "0.001",
            "--json",
            str(out),
            *extra,
        ],
        cwd=REPO,
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done, json.loads(out.read_text())["rounds"]


def test_bare_servers_and_leanrpc_answer_every_call_in_alternating_rounds(tmp_path):
    done, rows = _run(tmp_path, "--workers", "1", "--scale", "0.002")
    wanted = [
        ("bare grpc.aio", "unary"),
        ("bare grpc.aio", "stream"),
        ("bare grpc sync", "unary"),
        ("leanrpc serve", "unary"),
        ("leanrpc serve", "stream"),
    ]
    assert [(r["round"], r["target"], r["rpc"]) for r in rows] == [
        (n, target, rpc) for n in (1, 2) for target, rpc in wanted
    ]
    for row in rows:
        assert row["calls"] == row["valid"] == 6, row
        # Tiny runs may read 0 (the kernel counts CPU in clock ticks): a figure, never missing.
        assert row["server_cpu_ms_per_call"] >= 0, row
    assert "server CPU ms/call" in done.stdout


def test_bare_only_needs_no_dataset(tmp_path):
    empty = tmp_path / "no-shared"
    empty.mkdir()
    done, rows = _run(tmp_path, "--no-leanrpc", env={**os.environ, "LEANRPC_SHARED": str(empty)})
    assert {r["target"] for r in rows} == {"bare grpc.aio", "bare grpc sync"}
    assert all(r["valid"] == 6 for r in rows)
