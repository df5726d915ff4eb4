"""`leanrpc setup`: a real Lean toolchain, a (Mathlib) project and the REPL.

The work is a plan of named steps. Each step knows how to tell that it is
already done (so a rerun skips it) and is a list of actions: commands, or
files to write. `plan()` builds the steps without touching anything;
`execute()` runs them through a `Runner`, reporting progress per step. Tests
drive it with a fake runner; `--dry-run` prints the plan.

Layout under the work directory (default ~/.leanrpc/lean-<version>):

    project/        lake project (lean-toolchain, lakefile.toml, Mathlib dep)
    repl/           the REPL checkout, built with `lake build`
    lean-env.json   what `lake env` sets in the project (LEAN_PATH, LEAN_SYSROOT, ...)
    leanrpc.toml    the config `leanrpc serve --config` reads

The config runs the REPL binary itself with the recorded environment, not
`lake env repl`: lake would start the REPL as its child, and the sandbox's
seccomp filter (sandbox.block_spawn, docs/SECURITY.md) refuses process
creation, so "auto" turns the filter off for a `lake` command. `--via-lake`
writes the `lake env` form anyway.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Protocol

from ..config import Config, to_toml

ELAN_INIT_URL = "https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh"
REPL_REPOS = {
    "upstream": "https://github.com/leanprover-community/repl",
    # The incrementality fork: `incrementality: true` requests, prefix reuse.
    "fork": "https://github.com/augustepoiroux/repl",
}
MATHLIB_GIT = "https://github.com/leanprover-community/mathlib4"

# What `lake env` sets (Lake's Workspace.augmentedEnvVars) that the REPL reads.
# LEAN_SYSROOT is required, not just LEAN_PATH: without it the REPL's
# `Lean.findSysroot` runs `lean --print-prefix`, a spawn the filter refuses.
# Lake's own variables (LAKE, LEAN, ELAN_TOOLCHAIN, PATH, ...) only matter to
# programs that run lake or lean, which the REPL must not.
LEAN_ENV_VARS = ("LEAN_PATH", "LEAN_SYSROOT", "LEAN_SRC_PATH", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH")
REQUIRED_LEAN_ENV_VARS = ("LEAN_PATH", "LEAN_SYSROOT")
# Run by `lake env` in the project: JSON survives any character in a path and
# says which variables lake left unset (printenv would just skip them).
PRINT_ENV_SCRIPT = (
    'import json, os, sys; json.dump({"cwd": os.getcwd(), '
    '"env": {k: os.environ[k] for k in sys.argv[1:] if k in os.environ}}, sys.stdout)'
)


@dataclasses.dataclass
class Command:
    argv: list[str]
    cwd: Path | None = None
    capture: Path | None = None  # write stdout here (only if the command succeeds)

    def describe(self) -> str:
        where = f"(in {self.cwd}) " if self.cwd else ""
        into = f" > {self.capture}" if self.capture else ""
        return where + shlex.join(self.argv) + into  # quoted: the line can be pasted into a shell


@dataclasses.dataclass
class WriteFile:
    path: Path
    # A callable is rendered when the step runs: the config depends on what
    # an earlier step recorded.
    text: str | Callable[[], str]

    def content(self) -> str:
        return self.text() if callable(self.text) else self.text

    def describe(self) -> str:
        return f"write {self.path}"


@dataclasses.dataclass
class Step:
    name: str
    summary: str
    actions: list[Command | WriteFile]
    is_done: Callable[[], bool]


@dataclasses.dataclass
class SetupOptions:
    lean_version: str                  # a Lean release tag, e.g. "v4.19.0"
    mathlib: bool = False
    workdir: Path | None = None
    project: Path | None = None        # use this lake project instead of creating one
    repl: str = "upstream"             # "upstream" or "fork"
    repl_revision: str = ""            # default: the Lean version tag
    config_path: Path | None = None
    elan_home: Path | None = None
    workers: int = 0                   # 0: leave the config default (one per core)
    via_lake: bool = False             # `lake env repl` instead of the binary with lake's environment
    elan_installer: Path | None = None  # a local elan-init.sh (offline); default: download it

    def __post_init__(self) -> None:
        if not self.lean_version.startswith("v"):
            self.lean_version = "v" + self.lean_version
        if self.repl not in REPL_REPOS:
            raise ValueError(f"--repl must be one of {sorted(REPL_REPOS)}")
        self.workdir = Path(self.workdir or Path.home() / ".leanrpc" / f"lean-{self.lean_version}").expanduser().resolve()
        self.elan_home = Path(self.elan_home or os.environ.get("ELAN_HOME") or Path.home() / ".elan").expanduser()
        self.repl_revision = self.repl_revision or self.lean_version
        self.config_path = Path(self.config_path or self.workdir / "leanrpc.toml").expanduser().resolve()
        if self.project is not None:
            self.project = Path(self.project).expanduser().resolve()
        if self.elan_installer is not None:
            self.elan_installer = Path(self.elan_installer).expanduser().resolve()
            if not self.elan_installer.is_file():
                raise ValueError(f"--elan {self.elan_installer}: no such file (give a local elan-init.sh)")

    @property
    def toolchain(self) -> str:
        return f"leanprover/lean4:{self.lean_version}"

    @property
    def project_dir(self) -> Path:
        return self.project or self.workdir / "project"

    @property
    def repl_dir(self) -> Path:
        return self.workdir / "repl"

    @property
    def repl_binary(self) -> Path:
        return self.repl_dir / ".lake" / "build" / "bin" / "repl"

    @property
    def lean_env_path(self) -> Path:
        return self.workdir / "lean-env.json"


def plan(options: SetupOptions) -> list[Step]:
    """The steps, in order; nothing runs here."""
    elan = options.elan_home / "bin" / "elan"
    toolchain_dir = options.elan_home / "toolchains" / options.toolchain.replace("/", "--").replace(":", "---")
    project = options.project_dir
    repl_marker = options.repl_dir / ".leanrpc-revision"
    repl_source = f"{REPL_REPOS[options.repl]}@{options.repl_revision}"
    # Download, then run: no `curl | sh`, whose status is sh's even when the
    # download failed (no pipefail in POSIX sh).
    installer = options.elan_installer or options.workdir / "elan-init.sh"
    fetch = [] if options.elan_installer else [Command(["curl", "-sSfL", ELAN_INIT_URL, "-o", str(installer)])]
    steps = [
        Step(
            "elan", "install the Lean version manager",
            [*fetch, Command(["sh", str(installer), "-y", "--no-modify-path", "--default-toolchain", "none"])],
            lambda: elan.exists() or shutil.which("elan") is not None,
        ),
        Step(
            "toolchain", f"install Lean {options.lean_version}",
            [Command(["elan", "toolchain", "install", options.toolchain])],
            toolchain_dir.is_dir,
        ),
    ]
    if options.project is None:
        steps.append(Step(
            "project", f"create the lake project {project}",
            [WriteFile(project / "lean-toolchain", options.toolchain + "\n"),
             WriteFile(project / "lakefile.toml", _lakefile(options))],
            lambda: (project / "lakefile.toml").exists() and (project / "lean-toolchain").read_text().strip() == options.toolchain,
        ))
    if options.mathlib:
        mathlib_dir = project / ".lake" / "packages" / "mathlib"
        steps += [
            Step("dependencies", "fetch Mathlib and its dependencies (lake update)",
                 [Command(["lake", "update"], project)],
                 lambda: (mathlib_dir / ".git").exists() and (project / "lake-manifest.json").exists()),
            Step("cache", "download the compiled Mathlib (lake exe cache get)",
                 [Command(["lake", "exe", "cache", "get"], project)],
                 lambda: _has_mathlib_oleans(mathlib_dir)),
        ]
    steps += [
        Step(
            "repl-source", f"check out the REPL ({repl_source})",
            [Command(["git", "clone", REPL_REPOS[options.repl], str(options.repl_dir)]) if not (options.repl_dir / ".git").exists()
             else Command(["git", "fetch", "--tags", "origin"], options.repl_dir),
             Command(["git", "checkout", "--detach", options.repl_revision], options.repl_dir),
             WriteFile(repl_marker, repl_source + "\n")],
            lambda: repl_marker.exists() and repl_marker.read_text().strip() == repl_source,
        ),
        Step("repl-build", "build the REPL (lake build)",
             [Command(["lake", "build"], options.repl_dir)],
             lambda: options.repl_binary.exists() and _built_after(options.repl_binary, repl_marker)),
    ]
    if not options.via_lake:
        steps.append(Step(
            "lean-env", f"record the environment `lake env` gives in {project}",
            [Command(["lake", "env", sys.executable, "-I", "-c", PRINT_ENV_SCRIPT, *LEAN_ENV_VARS],
                     project, capture=options.lean_env_path)],
            lambda: _lean_env_current(options),
        ))
    steps.append(Step(
        "config", f"write {options.config_path}",
        [WriteFile(options.config_path, lambda: render_config(options))],
        lambda: _config_current(options),
    ))
    return steps


def read_lean_env(options: SetupOptions) -> dict[str, str]:
    """The variables the `lean-env` step recorded; SetupError if unusable."""
    path = options.lean_env_path
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        cwd, env = recorded["cwd"], recorded["env"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SetupError(f"no usable lake environment in {path} ({exc}); rerun `leanrpc setup`") from None
    if Path(cwd).resolve() != options.project_dir:
        raise SetupError(f"{path} was recorded in {cwd}, not in the project {options.project_dir}")
    missing = [name for name in REQUIRED_LEAN_ENV_VARS if not env.get(name)]
    if missing:
        raise SetupError(f"`lake env` in {options.project_dir} did not set {', '.join(missing)}; "
                         "this Lake is too old for the direct REPL command, rerun with --via-lake")
    return {name: env[name] for name in LEAN_ENV_VARS if env.get(name)}


def _lean_env_current(options: SetupOptions) -> bool:
    # Stale once lake's inputs change (`lake update`, a new toolchain) or the REPL is rebuilt.
    try:
        read_lean_env(options)
    except SetupError:
        return False
    project = options.project_dir
    inputs = [project / "lake-manifest.json", project / "lean-toolchain", project / "lakefile.toml",
              project / "lakefile.lean", options.repl_binary]
    recorded = options.lean_env_path.stat().st_mtime
    return all(recorded >= p.stat().st_mtime for p in inputs if p.exists())


def _config_current(options: SetupOptions) -> bool:
    try:
        wanted = render_config(options)
    except SetupError:  # nothing recorded yet (a dry run, or before `lean-env`)
        return False
    return options.config_path.exists() and options.config_path.read_text() == wanted


def _lakefile(options: SetupOptions) -> str:
    lines = ['name = "leanrpc_project"', 'defaultTargets = []', ""]
    if options.mathlib:
        lines += ["[[require]]", 'name = "mathlib"', f'git = "{MATHLIB_GIT}"', f'rev = "{options.lean_version}"', ""]
    return "\n".join(lines)


def _has_mathlib_oleans(mathlib_dir: Path) -> bool:
    # The build layout moved between Lake versions.
    return any((mathlib_dir / ".lake" / "build" / "lib" / sub / "Mathlib.olean").exists() for sub in ("lean", "."))


def _built_after(binary: Path, marker: Path) -> bool:
    return not marker.exists() or binary.stat().st_mtime >= marker.stat().st_mtime


def build_config(options: SetupOptions) -> Config:
    config = Config()
    config.repl.cwd = str(options.project_dir)
    # ELAN_HOME also makes the sandbox expose the toolchains under it.
    config.repl.env = {"ELAN_HOME": str(options.elan_home)}
    if options.via_lake:
        # elan's `lake` by absolute path: the server may run without elan on PATH.
        # In the project directory it picks the project's lean-toolchain.
        config.repl.command = [str(options.elan_home / "bin" / "lake"), "env", str(options.repl_binary)]
    else:
        lean_env = read_lean_env(options)
        config.repl.command = [str(options.repl_binary)]
        config.repl.env.update(lean_env)
        config.sandbox.expose = _paths_not_exposed(options, lean_env)
    config.repl.lean_version = options.lean_version
    config.repl.repl_revision = f"{'augustepoiroux/repl' if options.repl == 'fork' else 'leanprover-community/repl'}@{options.repl_revision}"
    config.repl.project_revision = f"mathlib {options.lean_version}" if options.mathlib else ""
    config.repl.incrementality = "on" if options.repl == "fork" else "off"
    if options.mathlib:
        config.pool.warm_headers = ["import Mathlib"]
        config.pool.header_timeout_s = 900.0
    if options.workers:
        config.pool.workers = options.workers
    return config


def _paths_not_exposed(options: SetupOptions, lean_env: dict[str, str]) -> list[str]:
    """Lean search-path directories the sandbox would not expose by itself.

    It exposes [repl] cwd (the project and its packages), ELAN_HOME (the
    toolchain) and the REPL binary's bin/..; a package or toolchain elsewhere
    (e.g. a `packagesDir` outside the project) must be named in sandbox.expose.
    """
    covered = [options.project_dir, options.elan_home.resolve(), options.repl_binary.parent.parent]
    wanted = lean_env["LEAN_PATH"].split(os.pathsep) + [lean_env["LEAN_SYSROOT"]]
    extra: list[str] = []
    for entry in wanted:
        path = Path(entry).resolve() if entry else None
        if path is None or not path.exists() or any(path.is_relative_to(c) for c in covered):
            continue
        if str(path) not in extra:
            extra.append(str(path))
    return extra


def render_config(options: SetupOptions) -> str:
    flags = (" --mathlib" if options.mathlib else "") + (" --via-lake" if options.via_lake else "")
    how = (
        "# The REPL runs under `lake env`, so sandbox.block_spawn \"auto\" leaves spawning allowed.\n"
        if options.via_lake else
        f"# The REPL runs directly with the environment `lake env` gives it (recorded in\n"
        f"# {options.lean_env_path}), so the sandbox's spawn filter stays on.\n"
        f"# After `lake update` in the project, rerun setup to refresh it.\n"
    )
    return (
        f"# Written by `leanrpc setup --lean {options.lean_version}{flags}`.\n{how}"
        f"# Serve with: leanrpc serve --config {options.config_path}\n\n" + to_toml(build_config(options))
    )


class Runner(Protocol):
    def run(self, command: Command, env: dict[str, str]) -> None: ...

    def write(self, action: WriteFile) -> None: ...


class SubprocessRunner:
    """Runs commands with their output passed through; raises on failure."""

    def run(self, command: Command, env: dict[str, str]) -> None:
        if command.cwd is not None:
            command.cwd.mkdir(parents=True, exist_ok=True)
        stdout = subprocess.PIPE if command.capture else None
        if command.argv[0] == "curl" and len(command.argv) > 4:
            Path(command.argv[-1]).parent.mkdir(parents=True, exist_ok=True)
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


class SetupError(RuntimeError):
    pass


# What to do without a network, per step that needs one.
OFFLINE_HINTS = {
    "elan": "offline? pass --elan PATH (a local elan-init.sh), or install elan into $ELAN_HOME beforehand",
    "toolchain": "offline? put the toolchain in $ELAN_HOME/toolchains first (a toolchain already present is skipped)",
    "dependencies": "offline? use --project DIR, a lake project whose packages are already fetched",
    "cache": "offline? use --project DIR, a lake project whose Mathlib is already built",
    "repl-source": "offline? put a checkout of the REPL in WORKDIR/repl (git fetch then needs no network only if the tag is there)",
}


class StepFailed(SetupError):
    """A step failed: which one, why, and what to do offline."""

    def __init__(self, prefix: str, name: str, why: str) -> None:
        hint = OFFLINE_HINTS.get(name)
        super().__init__(f"{prefix} failed: {why}" + (f"\n{hint}" if hint else ""))


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
        try:
            for action in step.actions:
                report(f"      {action.describe()}")
                if isinstance(action, WriteFile):
                    runner.write(action)
                else:
                    runner.run(action, env)
        except StepFailed:
            raise
        except SetupError as exc:
            raise StepFailed(prefix, step.name, str(exc)) from None
        except OSError as exc:
            raise StepFailed(prefix, step.name, f"{exc.filename or ''}: {exc.strerror}") from None
        seconds = time.monotonic() - started
        report(f"{prefix}: done in {seconds:.1f} s")
        reports.append(StepReport(step.name, "done", seconds))
    if not dry_run:
        report(f"config: {options.config_path}\nnext: leanrpc doctor --config {options.config_path}"
               f" && leanrpc serve --config {options.config_path}")
    return reports


def add_parser(sub):
    parser = sub.add_parser(
        "setup",
        help="install a real Lean toolchain, project and REPL; write a config",
        description="Install elan, Lean, a lake project (optionally with Mathlib) and the REPL, skipping "
                    "steps already done, and write a leanrpc config for them.",
    )
    parser.add_argument("--lean", required=True, metavar="VERSION", help="Lean release, e.g. v4.19.0 (required)")
    parser.add_argument("--mathlib", action="store_true",
                        help="a project that depends on Mathlib, with `lake exe cache get` (default: no Mathlib)")
    parser.add_argument("--project", metavar="DIR", help="use this lake project instead of creating one (default: create one)")
    parser.add_argument("--workdir", metavar="DIR", help="where the project and REPL go (default: ~/.leanrpc/lean-VERSION)")
    parser.add_argument("--repl", choices=["upstream", "fork"], default="upstream",
                        help="leanprover-community/repl, or the augustepoiroux/repl incrementality fork (default: upstream)")
    parser.add_argument("--repl-rev", metavar="REV", help="REPL git revision (default: the Lean version tag)")
    parser.add_argument("--output", metavar="FILE", help="config file to write (default: WORKDIR/leanrpc.toml)")
    parser.add_argument("--workers", type=int, metavar="N", help="pool size to write into the config (default: usable CPU cores)")
    parser.add_argument("--via-lake", action="store_true",
                        help="REPL command `lake env repl` (the sandbox then allows spawning) instead of the REPL "
                             "binary with lake's environment (default: the binary)")
    parser.add_argument("--elan", metavar="PATH",
                        help="a local elan-init.sh to run, for a machine without internet (default: download it)")
    parser.add_argument("--dry-run", action="store_true", help="print the steps; run nothing (default: run them)")
    return parser


def run(args) -> int:
    return main_setup(args)


def main_setup(args) -> int:
    """Entry point for `leanrpc setup`."""
    try:
        options = SetupOptions(
            lean_version=args.lean,
            mathlib=args.mathlib,
            workdir=args.workdir,
            project=args.project,
            repl=args.repl,
            repl_revision=args.repl_rev or "",
            config_path=args.output,
            workers=args.workers or 0,
            via_lake=getattr(args, "via_lake", False),
            elan_installer=getattr(args, "elan", None),
        )
        execute(options, dry_run=args.dry_run, report=lambda line: print(line, flush=True))
    except (SetupError, ValueError) as exc:
        print(f"setup failed: {exc}", file=sys.stderr)
        return 1
    return 0
