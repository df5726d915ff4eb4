"""`leanrpc serve` start errors: one line, exit 2, no traceback unless --debug; help and version."""

from __future__ import annotations

import socket

import pytest

from cli_support import leanrpc
from leanrpc import __version__
from leanrpc.commands import build_parser


def _one_error_line(done) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("leanrpc serve: error: ")
    return lines[0]


def test_port_in_use(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _one_error_line(leanrpc("serve", "--port", str(port), "--workers", "1"))
    assert f"cannot listen on 127.0.0.1:{port}" in line and "port is in use" in line


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[pool]\nworkerz = 2\n", "unknown config key pool.workerz"),
        (
            '[pool]\nworkers = "two"\n',
            "config key pool.workers must be an integer number >= 1, not 'two'",
        ),
        ("[server]\nport = 70000\n", "server.port must be an integer number from 0 to 65535"),
    ],
)
def test_bad_config_file(tmp_path, text, words):
    path = tmp_path / "leanrpc.toml"
    path.write_text(text)
    assert words in _one_error_line(leanrpc("serve", "--config", str(path)))


def test_missing_config_file(tmp_path):
    missing = tmp_path / "nope.toml"
    line = _one_error_line(leanrpc("serve", "--config", str(missing)))
    assert f"config file {missing} does not exist" in line


def test_bad_flag_value_is_checked_like_the_file():
    assert "pool.workers must be an integer number >= 1, not -3" in _one_error_line(
        leanrpc("serve", "--workers", "-3")
    )


def test_non_loopback_host_without_tokens():
    line = _one_error_line(leanrpc("serve", "--host", "0.0.0.0", "--port", "0", "--workers", "1"))
    assert "0.0.0.0" in line and "auth" in line


def test_debug_shows_the_traceback(tmp_path):
    done = leanrpc("serve", "--config", str(tmp_path / "nope.toml"), "--debug")
    assert done.returncode == 2
    assert "Traceback" in done.stderr and "does not exist" in done.stderr


def test_usage_error_exits_2():
    done = leanrpc("verify")
    assert done.returncode == 2
    assert done.stderr == "leanrpc verify: error: the following arguments are required: PATH\n"


def test_version():
    done = leanrpc("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"leanrpc {__version__}"


@pytest.mark.parametrize("command", ["serve", "verify", "setup", "doctor", "config"])
def test_help_documents_every_option_with_its_default_and_the_exit_codes(command):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    for action in sub._actions:
        if action.option_strings and action.dest != "help":
            assert action.help and ("(default" in action.help or action.required), (
                f"{command} {action.option_strings[0]}: {action.help!r}"
            )
    done = leanrpc(command, "--help")
    assert done.returncode == 0
    for code in ("0  ", "1  ", "2  ", "3  "):
        assert f"\n  {code}" in done.stdout, (
            f"exit code {code.strip()} missing in `leanrpc {command} --help`"
        )


def test_help_names_units():
    text = leanrpc("verify", "--help").stdout + leanrpc("serve", "--help").stdout
    assert "SECONDS" in text and "seconds" in text and "TCP port" in text
