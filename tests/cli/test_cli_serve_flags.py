"""`leanrpc serve`: taken side ports, --log-json on stdout, --log-level (issue 29)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import tempfile

import pytest

from cli_support import LEANRPC, clean_env, leanrpc
from leanrpc.client import Client
from testkit import free_port


@pytest.mark.parametrize("flag", ["--http-port", "--metrics-port"])
def test_taken_side_port_is_one_line_exit_2(flag):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = leanrpc("serve", "--port", "0", "--workers", "1", flag, str(port))
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()  # one line, no traceback
    assert line == (
        f"leanrpc serve: error: cannot listen on 127.0.0.1:{port}: the port is in use "
        f"(choose another with {flag}, or stop the other server)"
    )


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            ["--port", "PORT", "--http-port", "PORT"],
            "server.port and gateway.http_port are both port PORT; each door "
            "needs a port of its own (change --port or --http-port)",
        ),
        (
            ["--port", "0", "--metrics-port", "PORT", "--http-port", "PORT"],
            "server.metrics_port and gateway.http_port are both port PORT; each door needs a port of its own "
            "(change --metrics-port or --http-port)",
        ),
    ],
)
def test_two_doors_on_one_port_is_one_line_exit_2(flags, says):
    port = str(free_port())
    done = leanrpc("serve", "--workers", "1", *(port if f == "PORT" else f for f in flags))
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert (
        done.stderr == f"leanrpc serve: error: {says.replace('PORT', port)}\n"
    )  # nothing started, no traceback


def _serve_then_stop(*args: str) -> tuple[str, str, int]:
    """`leanrpc serve --port 0 ARGS` until it listens, one verify, SIGTERM: (stdout, stderr, status)."""
    stderr = tempfile.TemporaryFile("w+")
    process = subprocess.Popen(
        [LEANRPC, "serve", "--port", "0", "--workers", "1", *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=clean_env(),
    )
    try:
        first = process.stdout.readline()
        address = json.loads(first)["address"] if first.startswith("{") else first.split()[-1]
        with Client(address) as client:
            assert client.verify(["theorem j : 1 = 1 := rfl"])[0].status == "VALID"
    finally:
        process.send_signal(signal.SIGTERM)
        # The same buffered pipe readline() used: communicate() would skip what it buffered.
        out = process.stdout.read()
        process.wait(timeout=60)
        process.stdout.close()
        stderr.seek(0)
        err = stderr.read()
        stderr.close()
    return first + out, err, process.returncode


def test_log_json_makes_every_line_json_on_stdout_and_stderr():
    http = free_port()
    out, err, status = _serve_then_stop("--log-json", "--http-port", str(http))
    assert status == 0, err
    said = [json.loads(line) for line in out.splitlines()]  # every stdout line is JSON
    assert [s["event"] for s in said] == ["listening", "gateway", "stopped"]
    assert (
        said[0]["msg"].startswith("leanrpc listening on ")
        and said[1]["url"] == f"http://127.0.0.1:{http}"
    )
    records = [json.loads(line) for line in err.splitlines()]  # and every stderr line
    assert {"ts", "level", "logger", "msg"} <= set(records[0])
    request = next(r for r in records if r["logger"] == "leanrpc.requests")
    assert (request["rpc"], request["snippets"], request["outcomes"]) == (
        "VerifyStream",
        1,
        {"VALID": 1},
    )
    boot = next(r for r in records if r.get("event") == "boot")
    assert boot["worker"] == "w1" and boot["level"] == "info"


@pytest.mark.parametrize(
    ("config", "flags", "info_lines"),
    [
        ('[server]\nlog_level = "warning"\n', [], False),
        ('[server]\nlog_level = "warning"\n', ["--log-level", "info"], True),  # the flag wins
        ("", ["--log-level", "warning"], False),
        ("", [], True),  # info by default
    ],
)
def test_log_level_from_the_config_or_the_flag(tmp_path, config, flags, info_lines):
    (tmp_path / "leanrpc.toml").write_text(config)
    out, err, status = _serve_then_stop("--config", str(tmp_path / "leanrpc.toml"), *flags)
    assert status == 0, err
    assert out.startswith("leanrpc listening on ")
    levels = {line.split()[2] for line in err.splitlines()}
    assert ("INFO" in levels) == info_lines, err
    assert levels <= {"INFO", "WARNING", "ERROR"}  # no DEBUG at info or above


def test_log_level_is_checked():
    done = leanrpc("serve", "--log-level", "loud")
    assert done.returncode == 2
    assert "argument --log-level: invalid choice: 'loud'" in done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("command", ["serve", "doctor"])
@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--repl-cmd", "", "argument --repl-cmd: is empty; give the REPL's command line"),
        (
            "--repl-cmd",
            "lake env 'repl",
            'argument --repl-cmd: "lake env \'repl": no closing quotation',
        ),
    ],
)
def test_a_bad_repl_command_is_a_usage_error(command, flag, value, says):
    done = leanrpc(command, flag, value)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # nothing started
    assert len(done.stderr.strip().splitlines()) == 1  # one line, no usage block
    assert done.stderr.strip().splitlines()[-1] == f"leanrpc {command}: error: {says}"


def test_an_empty_host_is_a_usage_error():
    done = leanrpc("serve", "--host", "", "--port", "0")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.strip().splitlines()[-1] == "leanrpc serve: error: argument --host: is empty"
