"""`leanrpc setup` (plan, idempotence, config) with a fake runner; `leanrpc doctor` on the stand-in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from leanrpc.cli import main as cli_main
from leanrpc.config import Config
from leanrpc.ops.doctor import FAIL, OK, WARN, run_doctor
from leanrpc.ops.setup_lean import Command, SetupError, SetupOptions, execute, plan


class FakeRunner:
    """Records commands and leaves behind what the real ones would create."""

    def __init__(self, options: SetupOptions, fail_on: str = "") -> None:
        self.options = options
        self.fail_on = fail_on
        self.commands: list[Command] = []

    def run(self, command: Command, env: dict[str, str]) -> None:
        self.commands.append(command)
        assert env["ELAN_HOME"] == str(self.options.elan_home)
        line = " ".join(command.argv)
        if self.fail_on and self.fail_on in line:
            raise SetupError(f"`{line}` exited with status 1")
        o = self.options
        if "elan-init.sh" in line:
            touch(o.elan_home / "bin" / "elan")
        elif command.argv[:3] == ["elan", "toolchain", "install"]:
            (o.elan_home / "toolchains" / f"leanprover--lean4---{o.lean_version}").mkdir(parents=True)
        elif command.argv == ["lake", "update"]:
            (command.cwd / ".lake" / "packages" / "mathlib" / ".git").mkdir(parents=True)
            touch(command.cwd / "lake-manifest.json")
        elif command.argv == ["lake", "exe", "cache", "get"]:
            touch(command.cwd / ".lake" / "packages" / "mathlib" / ".lake" / "build" / "lib" / "lean" / "Mathlib.olean")
        elif command.argv[:2] == ["git", "clone"]:
            (Path(command.argv[3]) / ".git").mkdir(parents=True)
        elif command.argv == ["lake", "build"]:
            touch(o.repl_binary)

    def write(self, action) -> None:
        action.path.parent.mkdir(parents=True, exist_ok=True)
        action.path.write_text(action.text)


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


def options(tmp_path: Path, **kw) -> SetupOptions:
    return SetupOptions(lean_version=kw.pop("lean_version", "4.19.0"), workdir=tmp_path / "work",
                        elan_home=tmp_path / "elan", **kw)


def test_plan_lists_every_step_in_order(tmp_path):
    steps = plan(options(tmp_path, mathlib=True))
    assert [s.name for s in steps] == [
        "elan", "toolchain", "project", "dependencies", "cache", "repl-source", "repl-build", "config"]
    commands = [" ".join(a.argv) for s in steps for a in s.actions if isinstance(a, Command)]
    assert "elan toolchain install leanprover/lean4:v4.19.0" in commands
    assert "lake exe cache get" in commands
    assert f"git clone https://github.com/leanprover-community/repl {tmp_path / 'work' / 'repl'}" in commands
    assert "git checkout --detach v4.19.0" in commands
    without = [s.name for s in plan(options(tmp_path))]
    assert "cache" not in without and "dependencies" not in without


def test_dry_run_runs_and_writes_nothing(tmp_path):
    runner = FakeRunner(opts := options(tmp_path, mathlib=True))
    lines: list[str] = []
    reports = execute(opts, runner, dry_run=True, report=lines.append)
    assert [r.outcome for r in reports] == ["planned"] * 8
    assert runner.commands == []
    assert not (tmp_path / "work").exists()
    assert lines[0].startswith("[1/8] elan: would")


def test_setup_writes_a_config_serve_can_load_and_is_idempotent(tmp_path):
    opts = options(tmp_path, mathlib=True, workers=4)
    runner = FakeRunner(opts)
    lines: list[str] = []
    first = execute(opts, runner, report=lines.append)
    assert [r.outcome for r in first] == ["done"] * 8
    assert any(line.startswith("[5/8] cache: done in") for line in lines)

    config = Config.from_toml(opts.config_path)
    project = tmp_path / "work" / "project"
    assert config.repl.command == [str(tmp_path / "elan" / "bin" / "lake"), "env", str(opts.repl_binary)]
    assert config.repl.cwd == str(project)
    assert config.repl.env == {"ELAN_HOME": str(tmp_path / "elan")}
    assert config.repl.lean_version == "v4.19.0"
    assert config.repl.repl_revision == "leanprover-community/repl@v4.19.0"
    assert config.repl.project_revision == "mathlib v4.19.0"
    assert config.pool.warm_headers == ["import Mathlib"]
    assert config.pool.workers == 4
    assert (project / "lean-toolchain").read_text() == "leanprover/lean4:v4.19.0\n"
    assert 'rev = "v4.19.0"' in (project / "lakefile.toml").read_text()

    ran = len(runner.commands)
    second = execute(opts, runner, report=lines.append)
    assert [r.outcome for r in second] == ["skipped"] * 8
    assert len(runner.commands) == ran


def test_existing_project_and_fork(tmp_path):
    project = tmp_path / "mine"
    project.mkdir()
    opts = options(tmp_path, project=project, repl="fork", repl_revision="abc123")
    execute(opts, FakeRunner(opts), report=lambda _line: None)
    assert "project" not in [s.name for s in plan(opts)]
    config = Config.from_toml(opts.config_path)
    assert config.repl.cwd == str(project)
    assert config.repl.incrementality == "on"
    assert config.repl.repl_revision == "augustepoiroux/repl@abc123"
    assert config.pool.warm_headers == []


def test_a_failing_step_stops_the_setup(tmp_path):
    opts = options(tmp_path, mathlib=True)
    with pytest.raises(SetupError, match="cache get"):
        execute(opts, FakeRunner(opts, fail_on="cache get"), report=lambda _line: None)
    assert not opts.config_path.exists()
    # A rerun resumes at the failed step.
    runner = FakeRunner(opts)
    reports = execute(opts, runner, report=lambda _line: None)
    assert [r.outcome for r in reports][:5] == ["skipped"] * 4 + ["done"]


def test_cli_setup_dry_run(tmp_path, capsys):
    assert cli_main(["setup", "--lean", "v4.19.0", "--mathlib", "--dry-run", "--workdir", str(tmp_path / "w")]) == 0
    out = capsys.readouterr().out
    assert "lake exe cache get" in out and "[8/8] config" in out
    assert not (tmp_path / "w").exists()


async def test_doctor_reports_the_stand_in_as_a_stand_in():
    lines: list[str] = []
    report = await run_doctor(Config(), header="import Mathlib", report=lines.append)
    assert report.ok
    assert report.is_stand_in and report.verifier_kind == "stand-in"
    handshake = next(c for c in report.checks if c.name == "handshake")
    assert handshake.outcome == WARN and "STAND-IN, not Lean" in handshake.detail
    imported = next(c for c in report.checks if c.name.startswith("import"))
    assert imported.outcome == OK and report.import_seconds is not None and report.import_seconds >= 0
    assert report.import_rss_mb and report.import_rss_mb > 1
    assert not any("Lean v" in line or "verifier: Lean" in line for line in lines)


def test_doctor_cli_require_lean_fails_on_the_stand_in(capsys):
    assert cli_main(["doctor"]) == 0
    assert "verifier: leanrpc stand-in" in capsys.readouterr().out
    assert cli_main(["doctor", "--require-lean"]) == 1


async def test_doctor_checks_a_lake_project(tmp_path):
    # A fake `lake` in a project: versions come from it, the REPL behind
    # `lake env` is the stand-in, and doctor still says so.
    (tmp_path / "lean-toolchain").write_text("leanprover/lean4:v4.19.0\n")
    lake = tmp_path / "bin" / "lake"
    lake.parent.mkdir()
    lake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "Lake version 5.0.0-fake (Lean version 4.19.0)"; exit 0; fi\n'
        'if [ "$2" = "lean" ]; then echo "Lean (version 4.19.0, fake)"; exit 0; fi\n'
        f'exec {sys.executable} -m leanrpc.standin\n'
    )
    os.chmod(lake, 0o755)
    config = Config()
    config.repl.command = [str(lake), "env", "repl"]
    config.repl.cwd = str(tmp_path)
    config.sandbox.mode = "off"  # the fake lake lives in a private tmp dir
    report = await run_doctor(config, header="", report=lambda _line: None)
    by_name = {c.name: c for c in report.checks}
    assert by_name["lean-toolchain"].detail == "leanprover/lean4:v4.19.0"
    assert by_name["lake"].detail.startswith("Lake version 5.0.0-fake")
    assert by_name["lean"].detail == "Lean (version 4.19.0, fake)"
    assert report.is_stand_in and by_name["handshake"].outcome == WARN


async def test_doctor_fails_on_a_missing_command():
    config = Config()
    config.repl.command = ["/nonexistent/lake", "env", "repl"]
    report = await run_doctor(config, report=lambda _line: None)
    assert not report.ok
    assert report.checks[0].outcome == FAIL and "not found" in report.checks[0].detail
