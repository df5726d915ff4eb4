"""Running the setup plan: each step reports when it starts and how it ended.

Owns: `execute(options, runner)`, the `Runner` interface (tests pass a fake
one) and `SubprocessRunner`, the real one, and what a failure says. A step
fails when one of its actions fails, or when its actions all succeeded and
what it should leave behind is not there; the setup stops there with one line naming the
step, why it failed, and what to do without a network (`OFFLINE_HINTS`).
May import: commands.setup_options, commands.setup_plan.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from pathlib import Path
from typing import Callable, Protocol

from .setup_options import SetupError, SetupOptions
from .setup_plan import Command, Step, WriteFile, plan

# What to do without a network, per step that needs one.
OFFLINE_HINTS = {
    "elan": (
        "offline? pass --elan PATH (a local elan-init.sh), or put elan in $ELAN_HOME/bin "
        "beforehand; a toolchain already in $ELAN_HOME/toolchains is not downloaded again"
    ),
    "toolchain": (
        "offline? put the toolchain in $ELAN_HOME/toolchains first "
        "(a toolchain already present is skipped)"
    ),
    "dependencies": "offline? use --project DIR, a lake project whose packages are already fetched",
    "cache": "offline? use --project DIR, a lake project whose Mathlib is already built",
    "repl-source": (
        "offline? put a checkout of the REPL in WORKDIR/repl "
        "(git fetch then needs no network only if the tag is there)"
    ),
}


class StepFailed(SetupError):
    """A step failed: which one, why, and what to do offline (one line)."""

    def __init__(self, prefix: str, name: str, why: str) -> None:
        hint = OFFLINE_HINTS.get(name)
        super().__init__(f"{prefix} failed: {why}" + (f"; {hint}" if hint else ""))


class Runner(Protocol):
    def run(self, command: Command, env: dict[str, str]) -> None: ...

    def write(self, action: WriteFile) -> None: ...


class SubprocessRunner:
    """Runs commands with their output passed through; raises on failure."""

    def run(self, command: Command, env: dict[str, str]) -> None:
        if command.cwd is not None:
            command.cwd.mkdir(parents=True, exist_ok=True)
        stdout = subprocess.PIPE if command.capture else None
        if command.argv[0] == "curl" and "-o" in command.argv:
            Path(command.argv[command.argv.index("-o") + 1]).parent.mkdir(
                parents=True, exist_ok=True
            )
        try:
            completed = subprocess.run(command.argv, cwd=command.cwd, env=env, stdout=stdout)
        except FileNotFoundError:
            raise SetupError(f"cannot run `{command.argv[0]}`: no such program on PATH") from None
        if completed.returncode != 0:
            raise SetupError(f"`{command.describe()}` exited with status {completed.returncode}")
        if command.capture:
            self.write(WriteFile(command.capture, completed.stdout.decode("utf-8")))

    def write(self, action: WriteFile) -> None:
        action.path.parent.mkdir(parents=True, exist_ok=True)
        # Whole or nothing: a half-written file must not count as a done step.
        partial = action.path.with_name(action.path.name + ".partial")
        partial.write_text(action.content(), encoding="utf-8")
        partial.replace(action.path)


@dataclasses.dataclass
class StepReport:
    name: str
    outcome: str  # "done" (ran now), "skipped" (already done), "planned" (dry run)
    seconds: float = 0.0


def execute(
    options: SetupOptions,
    runner: Runner | None = None,
    *,
    dry_run: bool = False,
    report: Callable[[str], None] = print,
) -> list[StepReport]:
    """Runs the plan; every step reports when it starts and how it ended."""
    runner = runner or SubprocessRunner()
    steps = plan(options)
    env = dict(os.environ)
    env["ELAN_HOME"] = str(options.elan_home)
    env["PATH"] = f"{options.elan_home / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    reports: list[StepReport] = []
    for number, step in enumerate(steps, 1):
        prefix = f"[{number}/{len(steps)}] {step.name}"
        if step.is_done():
            report(f"{prefix}: already done, skipped ({step.summary})")
            reports.append(StepReport(step.name, "skipped"))
            continue
        if dry_run:
            report(f"{prefix}: would {step.summary}")
            for action in step.actions:
                report(f"      {action.describe()}")
            reports.append(StepReport(step.name, "planned"))
            continue
        report(f"{prefix}: {step.summary} ...")
        started = time.monotonic()
        _run_step(step, prefix, runner, env, report)
        seconds = time.monotonic() - started
        report(f"{prefix}: done in {seconds:.1f} s")
        reports.append(StepReport(step.name, "done", seconds))
    if not dry_run:
        report(
            f"config: {options.config_path}\nnext: leanrpc doctor --config {options.config_path}"
            f" && leanrpc serve --config {options.config_path}"
        )
    return reports


def _run_step(
    step: Step, prefix: str, runner: Runner, env: dict[str, str], report: Callable[[str], None]
) -> None:
    """Runs the step's actions, then checks that it is done; StepFailed otherwise."""
    try:
        for action in step.actions:
            report(f"      {action.describe()}")
            if isinstance(action, WriteFile):
                runner.write(action)
            else:
                runner.run(action, env)
        made = (step.has_product or step.is_done)()
    except StepFailed:
        raise
    except SetupError as exc:
        raise StepFailed(prefix, step.name, str(exc)) from None
    except OSError as exc:
        raise StepFailed(prefix, step.name, f"{exc.filename or ''}: {exc.strerror}") from None
    if not made:
        raise StepFailed(
            prefix, step.name, f"its commands succeeded, but there is no {step.product}"
        )
