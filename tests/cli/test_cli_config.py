"""`leanrpc config` and the config search path, through the real command."""

from __future__ import annotations

import os
import subprocess
import tomllib

from cli_support import LEANRPC, clean_env, leanrpc
from leanrpc.config import Config


def _run(*args: str, cwd, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LEANRPC, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**clean_env(), **env},
    )


def test_defaults_print_as_commented_toml_that_reads_back():
    done = leanrpc("config", "--defaults")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# leanrpc configuration")
    assert "# Health: a worker stopping for longer than this counts as stuck" in done.stdout
    printed, here = Config.from_dict(tomllib.loads(done.stdout)), Config()
    # The stand-in's default command is the running interpreter: `leanrpc` runs as
    # bin/python3 (its script's #!), pytest maybe as bin/python, the same program.
    assert os.path.realpath(printed.repl.command[0]) == os.path.realpath(here.repl.command[0])
    printed.repl.command[0] = here.repl.command[0]
    assert printed == here


def test_the_search_path_and_the_environment_reach_every_command(tmp_path):
    xdg = tmp_path / "xdg"
    (xdg / "leanrpc").mkdir(parents=True)
    (xdg / "leanrpc" / "leanrpc.toml").write_text("[pool]\nworkers = 3\n")
    shown = _run("config", cwd=tmp_path, XDG_CONFIG_HOME=str(xdg))
    assert shown.returncode == 0 and "\nworkers = 3\n" in shown.stdout
    assert f"from {xdg}/leanrpc/leanrpc.toml" in shown.stdout.splitlines()[0]
    (tmp_path / "leanrpc.toml").write_text("[pool]\nworkers = 4\n")
    shown = _run(
        "config", cwd=tmp_path, XDG_CONFIG_HOME=str(xdg), LEANRPC_SERVER__LOG_LEVEL="debug"
    )
    assert "\nworkers = 4\n" in shown.stdout and '\nlog_level = "debug"\n' in shown.stdout
    # serve and doctor read the same file: a bad ./leanrpc.toml stops both with one line, exit 2
    (tmp_path / "leanrpc.toml").write_text("[pool]\nworkers = 0\n")
    for command in (["serve", "--port", "0"], ["doctor"], ["config"]):
        done = _run(*command, cwd=tmp_path, XDG_CONFIG_HOME=str(xdg))
        assert done.returncode == 2, (command, done.stderr)
        assert (
            done.stderr
            == f"leanrpc {command[0]}: error: config key pool.workers must be an integer number >= 1, not 0\n"
        )
    # $LEANRPC_CONFIG comes before ./leanrpc.toml; --config before both
    (tmp_path / "named.toml").write_text("[pool]\nworkers = 6\n")
    (tmp_path / "explicit.toml").write_text("[pool]\nworkers = 7\n")
    named = _run("config", cwd=tmp_path, LEANRPC_CONFIG=str(tmp_path / "named.toml"))
    assert "\nworkers = 6\n" in named.stdout
    explicit = _run(
        "config",
        "--config",
        "explicit.toml",
        cwd=tmp_path,
        LEANRPC_CONFIG=str(tmp_path / "named.toml"),
    )
    assert "\nworkers = 7\n" in explicit.stdout


def test_a_bad_environment_variable_is_one_line_naming_it(tmp_path):
    done = _run("serve", "--port", "0", cwd=tmp_path, LEANRPC_SERVER__PORT="99999")
    assert done.returncode == 2
    assert done.stderr == (
        "leanrpc serve: error: config key server.port must be an integer number from 0 to 65535, "
        "not 99999 (set by LEANRPC_SERVER__PORT)\n"
    )
    done = _run("config", cwd=tmp_path, LEANRPC_POOL__WROKERS="2")
    assert (done.returncode, done.stderr) == (
        2,
        "leanrpc config: error: environment variable LEANRPC_POOL__WROKERS: "
        "unknown config key pool.wrokers\n",
    )
    missing = _run("config", cwd=tmp_path, LEANRPC_CONFIG=str(tmp_path / "none.toml"))
    assert (missing.returncode, missing.stderr) == (
        2,
        f"leanrpc config: error: config file {tmp_path}/none.toml does not exist\n",
    )


def test_reference_flag_prints_the_config_page():
    done = leanrpc("config", "--reference")
    assert done.returncode == 0 and done.stdout.startswith("# Configuration reference\n")
