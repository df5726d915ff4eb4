"""`leanrpc verify` as a user meets it: real command, real server on port 0."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import termios
import threading
import time

import pytest

from cli_support import BAD, GOOD, Served, leanrpc
from leanrpc.client import Client
from leanrpc.commands.verify import server_address
from testkit import free_port


@pytest.fixture(scope="module")
def server():
    served = Served()
    yield served
    served.stop()


def test_all_valid_exits_0(server, tmp_path):
    (tmp_path / "a.lean").write_text(GOOD)
    done = leanrpc("verify", str(tmp_path / "a.lean"), "--server", server.address)
    assert done.returncode == 0, done.stderr
    assert "VALID" in done.stdout and "1 of 1 valid" in done.stdout


def test_unreadable_and_missing_paths_get_one_line_each_and_the_rest_is_verified(server, tmp_path):
    (tmp_path / "good.lean").write_text(GOOD)
    (tmp_path / "bad.lean").write_text(BAD)
    (tmp_path / "latin1.lean").write_bytes("-- caf\xe9\n".encode("latin-1") + GOOD.encode())
    missing = tmp_path / "nope.lean"
    args = [
        str(tmp_path / "good.lean"),
        str(tmp_path / "latin1.lean"),
        str(missing),
        str(tmp_path / "bad.lean"),
    ]
    done = leanrpc("verify", *args, "--server", server.address)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stdout.splitlines()
    assert any(
        line.startswith("REJECTED")
        and "latin1.lean: not UTF-8 text (byte 0xe9 at offset 6)" in line
        for line in lines
    )
    assert any(
        line.startswith("REJECTED") and f"{missing}: no such file or folder" in line
        for line in lines
    )
    assert any(line.startswith("VALID") and "good.lean" in line for line in lines)
    assert any(line.startswith("INVALID") and "bad.lean" in line for line in lines)
    assert "1 of 4 valid" in done.stdout

    as_json = leanrpc("verify", *args, "--server", server.address, "--json")
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    by_id = {r["id"]: r["status"] for r in records}
    assert by_id == {
        str(tmp_path / "latin1.lean"): "REJECTED",
        str(missing): "REJECTED",
        str(tmp_path / "good.lean"): "VALID",
        str(tmp_path / "bad.lean"): "INVALID",
    }
    assert as_json.returncode == 1


def test_folder_without_lean_files_says_so(server, tmp_path):
    empty = tmp_path / "proofs"
    (empty / "sub").mkdir(parents=True)
    (empty / "notes.txt").write_text("x")
    line = f"{'REJECTED':<14} {empty}  (folder {empty} has no .lean files)"
    # Like a missing file: its own line and exit status 1, alone or beside a good file.
    alone = leanrpc("verify", str(empty), "--server", server.address, "--quiet")
    assert (alone.returncode, alone.stdout.splitlines(), alone.stderr) == (
        1,
        [line, "0 of 1 valid"],
        "",
    )
    (tmp_path / "good.lean").write_text(GOOD)
    beside = leanrpc(
        "verify", str(tmp_path / "good.lean"), str(empty), "--server", server.address, "--quiet"
    )
    assert beside.returncode == 1
    assert beside.stdout.splitlines()[1:] == [line, "1 of 2 valid"]


def test_folders_are_searched_recursively(server, tmp_path):
    (tmp_path / "p" / "q").mkdir(parents=True)
    (tmp_path / "p" / "q" / "a.lean").write_text(GOOD)
    (tmp_path / "p" / "b.lean").write_text(GOOD)
    done = leanrpc("verify", str(tmp_path / "p"), "--server", server.address, "--json")
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 2


def test_no_server_is_one_line_with_the_address_and_a_hint(tmp_path):
    (tmp_path / "a.lean").write_text(GOOD)
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    done = leanrpc("verify", str(tmp_path / "a.lean"), "--server", address, "--retries", "1")
    assert done.returncode == 2
    assert time.monotonic() - started < 60
    err = done.stderr.strip().splitlines()
    assert len(err) == 1, done.stderr
    assert address in err[0] and "leanrpc serve" in err[0] and "cannot reach" in err[0]
    assert done.stdout == ""


def test_host_without_port_means_50051(tmp_path):
    assert server_address("example.org") == "example.org:50051"
    assert server_address("example.org:7000") == "example.org:7000"
    assert server_address("::1") == "[::1]:50051"
    assert server_address("[::1]") == "[::1]:50051"
    assert server_address("[::1]:9") == "[::1]:9"
    (tmp_path / "a.lean").write_text(GOOD)
    done = leanrpc(
        "verify", str(tmp_path / "a.lean"), "--server", "nonexistent.invalid", "--retries", "0"
    )
    assert done.returncode == 2
    assert "nonexistent.invalid:50051" in done.stderr and ":443" not in done.stderr


def test_stream_that_breaks_midway_prints_what_arrived_then_the_error(tmp_path):
    # One body per exchange: pipelined, the hang would be answered TIMEOUT from its
    # group (pool/pipeline.py) instead of running alone at the end (CI, 2026-12-06).
    config = tmp_path / "server.toml"
    config.write_text("[pool]\npipeline_bodies = 1\n")
    served = Served("--config", str(config))
    try:
        for i in range(3):
            (tmp_path / f"a{i}.lean").write_text(GOOD)
        # Sorted last: with one worker it runs after the three quick files.
        (tmp_path / "z_hang.lean").write_text(
            "theorem h : True := by\n  --@standin: hang\n  trivial\n"
        )
        process = leanrpc_popen(
            "verify",
            str(tmp_path),
            "--server",
            served.address,
            "--json",
            "--retries",
            "1",
        )
        # The CLI flushes each JSON record as it arrives: the server dies only
        # once the three quick records are out and the hang alone runs (under
        # load a canary or a warm-up can keep the one worker busy with an empty
        # queue before the CLI's batch even arrives, so "busy" alone proves nothing).
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
        reader.start()
        deadline = time.monotonic() + 120
        while len(lines) < 3 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert len(lines) == 3, (lines, process.poll())
        _wait_until_only_the_hang_runs(served.address)
        served.kill()  # the server dies mid-stream
        process.wait(timeout=120)
        reader.join(timeout=30)
        err = process.stderr.read()
    finally:
        served.stop()
    out = "".join(lines)
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["status"] for r in records] == ["VALID"] * 3
    assert sorted(r["id"] for r in records) == [str(tmp_path / f"a{i}.lean") for i in range(3)]
    assert process.returncode == 2
    assert "3 of 4 results arrived" in err and "Traceback" not in err


def leanrpc_popen(*args: str):
    import subprocess

    from cli_support import LEANRPC, clean_env

    return subprocess.Popen(
        [LEANRPC, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env()
    )


def _wait_until_only_the_hang_runs(address: str, timeout_s: float = 60) -> None:
    """Queue empty and the one worker busy, steadily (the three quick files are done)."""
    deadline = time.monotonic() + timeout_s
    steady_since = None
    with Client(address, max_retries=0) as client:
        while time.monotonic() < deadline:
            info = client.server_info()
            busy = sum(
                n
                for state, n in info.worker_states.items()
                if state not in ("IDLE", "DEAD", "STARTING", "BOOTING")
            )
            if info.queue_depth == 0 and busy >= 1:
                steady_since = steady_since or time.monotonic()
                if time.monotonic() - steady_since > 1.5:
                    return
            else:
                steady_since = None
            time.sleep(0.05)
    raise AssertionError("the hanging file never became the only job running")


def test_progress_bar_only_on_a_terminal(server, tmp_path):
    for i in range(3):
        (tmp_path / f"a{i}.lean").write_text(GOOD)
    piped = leanrpc("verify", str(tmp_path), "--server", server.address, "--quiet")
    assert piped.returncode == 0 and piped.stderr == ""  # no bar into a pipe or a log file

    import subprocess

    from cli_support import LEANRPC, clean_env

    main, secondary = pty.openpty()
    # A real terminal has a size; tqdm draws nothing into a 0-column one.
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        process = subprocess.Popen(
            [LEANRPC, "verify", str(tmp_path), "--server", server.address],
            stdout=subprocess.PIPE,
            stderr=secondary,
            text=True,
            env=clean_env(),
        )
        out, _ = process.communicate(timeout=120)
        os.close(secondary)
        secondary = -1
        seen = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(main)
        if secondary != -1:
            os.close(secondary)
    assert process.returncode == 0 and "3 of 3 valid" in out
    assert b"verify" in seen and b"3/3" in seen  # tqdm drew on the terminal
