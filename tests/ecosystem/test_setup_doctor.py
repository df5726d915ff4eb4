"""`leanrpc setup` (plan, idempotence, config) with a fake runner; `leanrpc doctor` on the stand-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from leanrpc.cli import main as cli_main
from leanrpc.commands.doctor import FAIL, OK, WARN, run_doctor
from leanrpc.commands.setup_options import SetupError, SetupOptions
from leanrpc.commands.setup_plan import Command, WriteFile, plan
from leanrpc.commands.setup_run import SubprocessRunner, execute
from leanrpc.config import Config
from leanrpc.security.sandbox import make_sandbox_launcher, resolve_block_spawn


class FakeRunner:
    """Records commands and leaves behind what the real ones would create.

    `lake env CMD` really runs CMD (the recording script) with the variables
    `lake_env` says lake sets, so the script and its parsing are tested too.
    """

    def __init__(
        self,
        options: SetupOptions,
        fail_on: str = "",
        lake_env: dict[str, str] | None = None,
        repl_script: str = "",
    ) -> None:
        self.options = options
        self.repl_script = repl_script
        self.fail_on = fail_on
        self.commands: list[Command] = []
        self.lake_env = fake_lake_env(options) if lake_env is None else lake_env

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
            (o.elan_home / "toolchains" / f"leanprover--lean4---{o.lean_version}").mkdir(
                parents=True
            )
        elif command.argv == ["lake", "update"]:
            (command.cwd / ".lake" / "packages" / "mathlib" / ".git").mkdir(parents=True)
            touch(command.cwd / "lake-manifest.json")
        elif command.argv == ["lake", "exe", "cache", "get"]:
            touch(
                command.cwd
                / ".lake"
                / "packages"
                / "mathlib"
                / ".lake"
                / "build"
                / "lib"
                / "lean"
                / "Mathlib.olean"
            )
        elif command.argv[:2] == ["git", "clone"]:
            (Path(command.argv[3]) / ".git").mkdir(parents=True)
        elif command.argv == ["lake", "build"]:
            touch(o.repl_binary)
            if self.repl_script:
                o.repl_binary.write_text(self.repl_script)
                o.repl_binary.chmod(0o755)
        elif command.argv[:2] == ["lake", "env"]:
            assert command.capture is not None
            done = subprocess.run(
                command.argv[2:],
                cwd=command.cwd,
                env={**env, **self.lake_env},
                capture_output=True,
                text=True,
                check=True,
            )
            self.write(WriteFile(command.capture, done.stdout))

    def write(self, action) -> None:
        action.path.parent.mkdir(parents=True, exist_ok=True)
        action.path.write_text(action.content())


def fake_lake_env(o: SetupOptions) -> dict[str, str]:
    sysroot = o.elan_home / "toolchains" / f"leanprover--lean4---{o.lean_version}"
    packages = o.project_dir / ".lake" / "packages"
    return {
        "LEAN_PATH": os.pathsep.join(
            [
                str(packages / "mathlib" / ".lake" / "build" / "lib" / "lean"),
                str(o.project_dir / ".lake" / "build" / "lib" / "lean"),
                str(sysroot / "lib" / "lean"),
            ]
        ),
        "LEAN_SYSROOT": str(sysroot),
        "LEAN_SRC_PATH": str(o.project_dir),
        "LD_LIBRARY_PATH": str(sysroot / "lib"),
        "LAKE": str(sysroot / "bin" / "lake"),  # lake's own variable: not copied
    }


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


def options(tmp_path: Path, **kw) -> SetupOptions:
    return SetupOptions(
        lean_version=kw.pop("lean_version", "4.19.0"),
        workdir=tmp_path / "work",
        elan_home=tmp_path / "elan",
        **kw,
    )


def test_plan_lists_every_step_in_order(tmp_path):
    steps = plan(options(tmp_path, mathlib=True))
    assert [s.name for s in steps] == [
        "elan",
        "toolchain",
        "project",
        "dependencies",
        "cache",
        "repl-source",
        "repl-build",
        "lean-env",
        "config",
    ]
    commands = [" ".join(a.argv) for s in steps for a in s.actions if isinstance(a, Command)]
    lean_env = steps[-2].actions[0]
    assert lean_env.argv[:2] == ["lake", "env"] and lean_env.cwd == tmp_path / "work" / "project"
    assert lean_env.capture == tmp_path / "work" / "lean-env.json"
    assert "LEAN_PATH" in lean_env.argv and "LEAN_SYSROOT" in lean_env.argv
    assert "elan toolchain install leanprover/lean4:v4.19.0" in commands
    assert "lake exe cache get" in commands
    assert (
        f"git clone https://github.com/leanprover-community/repl {tmp_path / 'work' / 'repl'}"
        in commands
    )
    assert "git checkout --detach v4.19.0" in commands
    without = [s.name for s in plan(options(tmp_path))]
    assert "cache" not in without and "dependencies" not in without
    assert "lean-env" not in [s.name for s in plan(options(tmp_path, via_lake=True))]


def test_dry_run_runs_and_writes_nothing(tmp_path):
    runner = FakeRunner(opts := options(tmp_path, mathlib=True))
    lines: list[str] = []
    reports = execute(opts, runner, dry_run=True, report=lines.append)
    assert [r.outcome for r in reports] == ["planned"] * 9
    assert runner.commands == []
    assert not (tmp_path / "work").exists()
    assert lines[0].startswith("[1/9] elan: would")
    assert any(line.startswith("[8/9] lean-env: would") for line in lines)


def test_setup_writes_a_config_serve_can_load_and_is_idempotent(tmp_path):
    opts = options(tmp_path, mathlib=True, workers=4)
    runner = FakeRunner(opts)
    lines: list[str] = []
    first = execute(opts, runner, report=lines.append)
    assert [r.outcome for r in first] == ["done"] * 9
    assert any(line.startswith("[5/9] cache: done in") for line in lines)

    config = Config.from_toml(opts.config_path)
    project = tmp_path / "work" / "project"
    # The REPL binary itself, with what `lake env` set (not lake's own LAKE).
    assert config.repl.command == [str(opts.repl_binary)]
    assert config.repl.cwd == str(project)
    lake_env = fake_lake_env(opts)
    assert config.repl.env == {
        "ELAN_HOME": str(tmp_path / "elan"),
        **{
            k: lake_env[k]
            for k in ("LEAN_PATH", "LEAN_SYSROOT", "LEAN_SRC_PATH", "LD_LIBRARY_PATH")
        },
    }
    assert resolve_block_spawn(config) == (True, "auto")
    assert config.sandbox.expose == []  # every search directory is under the project or ELAN_HOME
    assert config.repl.lean_version == "v4.19.0"
    assert config.repl.repl_revision == "leanprover-community/repl@v4.19.0"
    assert config.repl.project_revision == "mathlib v4.19.0"
    assert config.pool.warm_headers == ["import Mathlib"]
    assert config.pool.workers == 4
    assert (project / "lean-toolchain").read_text() == "leanprover/lean4:v4.19.0\n"
    assert 'rev = "v4.19.0"' in (project / "lakefile.toml").read_text()

    ran = len(runner.commands)
    second = execute(opts, runner, report=lines.append)
    assert [r.outcome for r in second] == ["skipped"] * 9
    assert len(runner.commands) == ran


def test_lean_env_is_recorded_again_when_the_manifest_changes(tmp_path):
    opts = options(tmp_path, mathlib=True)
    execute(opts, FakeRunner(opts), report=lambda _line: None)
    manifest = opts.project_dir / "lake-manifest.json"
    later = opts.lean_env_path.stat().st_mtime + 10
    os.utime(manifest, (later, later))  # as after a `lake update`
    new_env = {**fake_lake_env(opts), "LEAN_PATH": "/elsewhere/lib/lean"}
    runner = FakeRunner(opts, lake_env=new_env)
    reports = {r.name: r.outcome for r in execute(opts, runner, report=lambda _line: None)}
    assert reports["lean-env"] == "done" and reports["config"] == "done"
    assert reports["repl-build"] == "skipped"
    assert [c.argv[:2] for c in runner.commands] == [["lake", "env"]]
    assert Config.from_toml(opts.config_path).repl.env["LEAN_PATH"] == "/elsewhere/lib/lean"


def test_via_lake_writes_the_lake_env_command_and_leaves_spawning_on(tmp_path):
    opts = options(tmp_path, via_lake=True)
    runner = FakeRunner(opts)
    reports = execute(opts, runner, report=lambda _line: None)
    assert "lean-env" not in [r.name for r in reports]
    assert not any(c.argv[:2] == ["lake", "env"] for c in runner.commands)
    config = Config.from_toml(opts.config_path)
    assert config.repl.command == [
        str(tmp_path / "elan" / "bin" / "lake"),
        "env",
        str(opts.repl_binary),
    ]
    assert config.repl.env == {"ELAN_HOME": str(tmp_path / "elan")}
    on, why = resolve_block_spawn(config)
    assert not on and "lake" in why
    assert "--via-lake" in opts.config_path.read_text().splitlines()[0]


def test_a_lake_without_lean_sysroot_stops_before_the_config(tmp_path):
    opts = options(tmp_path)
    lake_env = {k: v for k, v in fake_lake_env(opts).items() if k != "LEAN_SYSROOT"}
    with pytest.raises(SetupError, match="did not set LEAN_SYSROOT.*--via-lake"):
        execute(opts, FakeRunner(opts, lake_env=lake_env), report=lambda _line: None)
    assert not opts.config_path.exists()


def test_search_paths_outside_the_exposed_trees_go_to_sandbox_expose(tmp_path):
    outside = tmp_path / "shared-packages" / "batteries" / ".lake" / "build" / "lib" / "lean"
    outside.mkdir(parents=True)
    opts = options(tmp_path)
    lake_env = fake_lake_env(opts)
    lake_env["LEAN_PATH"] += os.pathsep + str(outside) + os.pathsep + str(tmp_path / "not-built")
    execute(opts, FakeRunner(opts, lake_env=lake_env), report=lambda _line: None)
    assert Config.from_toml(opts.config_path).sandbox.expose == [str(outside)]


@pytest.mark.skipif(
    os.geteuid() != 0, reason="the unshare sandbox needs a root server (CI runs as root)"
)
async def test_the_written_config_boots_its_repl_under_the_spawn_filter(tmp_path):
    # The "REPL binary" execs the stand-in (an exec, no new process), as the real one needs none.
    tmp_path.chmod(0o755)  # the worker's uid must reach it
    opts = options(tmp_path)
    script = f"#!/bin/sh\nexec {sys.executable} -m leanrpc.standin\n"
    execute(opts, FakeRunner(opts, repl_script=script), report=lambda _line: None)
    sysroot = Path(fake_lake_env(opts)["LEAN_SYSROOT"])
    touch(sysroot / "lib" / "lean" / "Init.olean")
    touch(sysroot / "bin" / "lean")
    (sysroot / "bin" / "lean").write_text('#!/bin/sh\necho "Lean (version 4.19.0, fake)"\n')
    (sysroot / "bin" / "lean").chmod(0o755)
    config = Config.from_toml(opts.config_path)
    config.sandbox.mode = "unshare"
    launcher = make_sandbox_launcher(config)
    assert launcher.block_spawn and "process creation blocked by seccomp" in launcher.describe()
    report = await run_doctor(config, header="", report=lambda _line: None)
    by_name = {c.name: c for c in report.checks}
    assert report.ok, [c for c in report.checks if c.outcome == FAIL]
    assert report.is_stand_in and by_name["handshake"].outcome == WARN
    assert by_name["spawn filter"].outcome == OK


def test_subprocess_runner_records_the_environment_it_runs_in(tmp_path):
    # The real runner and the real recording command, with this Python standing in for lake.
    opts = options(tmp_path)
    command = next(s for s in plan(opts) if s.name == "lean-env").actions[0]
    opts.project_dir.mkdir(parents=True)
    env = {**os.environ, "LEAN_PATH": "/a:/b", "LEAN_SYSROOT": "/sysroot"}
    env.pop("LEAN_SRC_PATH", None)
    SubprocessRunner().run(Command(command.argv[2:], command.cwd, command.capture), env)
    recorded = json.loads(opts.lean_env_path.read_text())
    assert Path(recorded["cwd"]).resolve() == opts.project_dir
    assert recorded["env"]["LEAN_PATH"] == "/a:/b" and "LEAN_SRC_PATH" not in recorded["env"]
    with pytest.raises(SetupError, match="exited with status 3"):
        SubprocessRunner().run(
            Command([sys.executable, "-c", "exit(3)"], capture=tmp_path / "x"), env
        )
    assert not (tmp_path / "x").exists()


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
    assert (
        cli_main(
            [
                "setup",
                "--lean",
                "v4.19.0",
                "--mathlib",
                "--dry-run",
                "--workdir",
                str(tmp_path / "w"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "lake exe cache get" in out and "[8/9] lean-env" in out and "[9/9] config" in out
    assert not (tmp_path / "w").exists()
    assert (
        cli_main(
            [
                "setup",
                "--lean",
                "v4.19.0",
                "--via-lake",
                "--dry-run",
                "--workdir",
                str(tmp_path / "w"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "lean-env" not in out and "[6/6] config" in out


async def test_doctor_reports_the_stand_in_as_a_stand_in():
    lines: list[str] = []
    report = await run_doctor(Config(), header="import Mathlib", report=lines.append)
    assert report.ok
    assert report.is_stand_in and report.verifier_kind == "stand-in"
    handshake = next(c for c in report.checks if c.name == "handshake")
    assert handshake.outcome == WARN and "STAND-IN, not Lean" in handshake.detail
    imported = next(c for c in report.checks if c.name.startswith("import"))
    assert (
        imported.outcome == OK and report.import_seconds is not None and report.import_seconds >= 0
    )
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
        f"exec {sys.executable} -m leanrpc.standin\n"
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
    assert by_name["spawn filter"].outcome == WARN and "lake" in by_name["spawn filter"].detail


async def test_doctor_checks_a_direct_repl_with_lakes_environment(tmp_path):
    # What setup writes by default: the REPL binary (here the stand-in) with
    # LEAN_SYSROOT and LEAN_PATH; versions come from the sysroot's lean.
    (tmp_path / "lean-toolchain").write_text("leanprover/lean4:v4.19.0\n")
    sysroot = tmp_path / "toolchain"
    lean = sysroot / "bin" / "lean"
    lean.parent.mkdir(parents=True)
    lean.write_text('#!/bin/sh\necho "Lean (version 4.19.0, fake)"\n')
    os.chmod(lean, 0o755)
    touch(sysroot / "lib" / "lean" / "Init.olean")
    config = Config()
    config.repl.cwd = str(tmp_path)
    config.repl.env = {
        "LEAN_SYSROOT": str(sysroot),
        "LEAN_PATH": str(tmp_path / ".lake" / "build" / "lib" / "lean"),
    }
    config.sandbox.mode = "off"
    report = await run_doctor(config, header="", report=lambda _line: None)
    by_name = {c.name: c for c in report.checks}
    assert report.ok
    assert by_name["lean-toolchain"].detail == "leanprover/lean4:v4.19.0"
    assert by_name["lean"].outcome == OK and by_name["lean"].detail == "Lean (version 4.19.0, fake)"
    assert by_name["lean-path"].outcome == OK and "(1 not built yet)" in by_name["lean-path"].detail
    assert by_name["spawn filter"].outcome == OK

    # Without LEAN_SYSROOT the REPL would spawn `lean --print-prefix`; without Init nothing imports.
    config.repl.env = {"LEAN_PATH": str(tmp_path / "nowhere")}
    report = await run_doctor(config, header="", report=lambda _line: None)
    by_name = {c.name: c for c in report.checks}
    assert by_name["lean"].outcome == WARN and "LEAN_SYSROOT" in by_name["lean"].detail
    assert by_name["lean-path"].outcome == FAIL and not report.ok


async def test_doctor_fails_on_a_missing_command():
    config = Config()
    config.repl.command = ["/nonexistent/lake", "env", "repl"]
    report = await run_doctor(config, report=lambda _line: None)
    assert not report.ok
    assert report.checks[0].outcome == FAIL and "not found" in report.checks[0].detail
