"""`leanrpc serve`: taken side ports, --log-json on stdout, --log-level (issue 29)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess

import pytest
from cli_support import LEANRPC, clean_env, leanrpc


@pytest.mark.parametrize("flag", ["--http-port", "--metrics-port"])
def test_taken_side_port_is_one_line_exit_2(flag):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = leanrpc("serve", "--port", "0", "--workers", "1", flag, str(port))
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    line, = done.stderr.strip().splitlines()  # one line, no traceback
    assert line == (f"leanrpc serve: error: cannot listen on 127.0.0.1:{port}: the port is in use "
                    f"(choose another with {flag}, or stop the other server)")


def test_log_json_makes_stdout_json_too_and_log_level_filters():
    process = subprocess.Popen([LEANRPC, "serve", "--port", "0", "--workers", "1", "--log-json", "--log-level", "warning"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
    try:
        first = json.loads(process.stdout.readline())
        assert first["event"] == "listening" and first["msg"].startswith("leanrpc listening on ")
    finally:
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=60)
    assert process.returncode == 0
    records = [json.loads(line) for line in err.splitlines()]
    assert all(r["level"] in ("warning", "error") for r in records), records  # no info lines at warning


def test_log_level_is_checked():
    done = leanrpc("serve", "--log-level", "loud")
    assert done.returncode == 2
    assert "argument --log-level: invalid choice: 'loud'" in done.stderr.strip().splitlines()[-1]
