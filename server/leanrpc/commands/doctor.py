"""`leanrpc doctor`: checks a configured REPL before you serve it.

Checks, in order: the REPL command resolves, the toolchain's versions (for a
`lake env` command, or a REPL binary run with lake's recorded environment:
LEAN_SYSROOT and LEAN_PATH), whether the sandbox's spawn filter applies to
this command, the REPL handshake (one worker boots and answers
`#eval Lean.versionString`, which gives the verifier identity), then the time
and memory of loading an import header (`import Mathlib` by default when the
project depends on Mathlib). The stand-in passes these checks but is always
reported as the stand-in, never as Lean.
May import: config, results, security.sandbox, pool, services.verify (one real
worker boots through them), commands.argtypes, commands.configref, commands.showconfig.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..config import Config
from ..results import STAND_IN_KIND
from . import argtypes
from .configref import load
from .showconfig import CONFIG_HELP

OK, WARN, FAIL = "ok", "warn", "FAIL"


@dataclasses.dataclass
class Check:
    name: str
    outcome: str  # OK, WARN or FAIL
    detail: str


@dataclasses.dataclass
class DoctorReport:
    checks: list[Check] = dataclasses.field(default_factory=list)
    verifier_kind: str = ""
    lean_version: str = ""
    import_seconds: float | None = None
    import_rss_mb: float | None = None

    @property
    def ok(self) -> bool:
        return all(c.outcome != FAIL for c in self.checks)

    @property
    def is_stand_in(self) -> bool:
        return self.verifier_kind == STAND_IN_KIND

    def add(self, name: str, outcome: str, detail: str) -> Check:
        check = Check(name, outcome, detail)
        self.checks.append(check)
        return check


def default_header(config: Config) -> str:
    cwd = Path(config.repl.cwd) if config.repl.cwd else None
    if cwd is not None and (cwd / ".lake" / "packages" / "mathlib").exists():
        return "import Mathlib"
    if cwd is not None and "mathlib" in _read(cwd / "lakefile.toml") + _read(cwd / "lakefile.lean"):
        return "import Mathlib"
    return "import Mathlib" if config.pool.warm_headers == ["import Mathlib"] else ""


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").lower()
    except OSError:
        return ""


async def run_doctor(config: Config, *, header: str | None = None, report=print) -> DoctorReport:
    """Runs every check; `report` gets one line per finished check."""
    result = DoctorReport()

    def emit(check: Check) -> None:
        report(f"{check.outcome:<4} {check.name}: {check.detail}")

    command_ok = _check_command(config, result)
    emit(result.checks[-1])
    if not command_ok:
        return result
    for check in [*_check_versions(config), _check_spawn_filter(config)]:
        result.checks.append(check)
        emit(check)
    await _check_repl(config, result, default_header(config) if header is None else header, emit)
    return result


def _check_command(config: Config, result: DoctorReport) -> bool:
    argv = config.repl.command
    if not argv:
        result.add("repl command", FAIL, "[repl] command is empty")
        return False
    program = argv[0]
    if shutil.which(program) is None and not Path(program).is_file():
        result.add(
            "repl command", FAIL, f"{program!r} not found (is elan's bin directory on PATH?)"
        )
        return False
    if config.repl.cwd and not Path(config.repl.cwd).is_dir():
        result.add("repl command", FAIL, f"[repl] cwd {config.repl.cwd} is not a directory")
        return False
    result.add(
        "repl command", OK, " ".join(argv) + (f" (in {config.repl.cwd})" if config.repl.cwd else "")
    )
    return True


def _check_versions(config: Config) -> list[Check]:
    program = Path(config.repl.command[0]).name
    lean_env = {k: v for k, v in config.repl.env.items() if k in ("LEAN_PATH", "LEAN_SYSROOT")}
    if program != "lake" and not lean_env:
        return [
            Check("toolchain", OK, f"no lake project check: the command runs {program!r} directly")
        ]
    cwd = Path(config.repl.cwd or ".")
    checks = []
    toolchain = _read(cwd / "lean-toolchain").strip()
    checks.append(
        Check(
            "lean-toolchain", OK if toolchain else WARN, toolchain or f"no lean-toolchain in {cwd}"
        )
    )
    if program != "lake":
        return checks + _check_direct_lean(config, cwd)
    lake = config.repl.command[0]
    for name, argv in (("lake", [lake, "--version"]), ("lean", [lake, "env", "lean", "--version"])):
        checks.append(_version_check(name, argv, config, cwd))
    return checks


def _version_check(name: str, argv: list[str], config: Config, cwd: Path) -> Check:
    try:
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=300, env=_child_env(config)
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(name, FAIL, f"`{' '.join(argv)}` failed: {exc}")
    text = (done.stdout or done.stderr).strip().splitlines()
    return Check(
        name,
        OK if done.returncode == 0 else FAIL,
        text[0] if text else f"exit status {done.returncode}",
    )


def _check_direct_lean(config: Config, cwd: Path) -> list[Check]:
    """The REPL binary run with lake's environment (what `leanrpc setup` writes)."""
    import os

    sysroot = config.repl.env.get("LEAN_SYSROOT", "")
    checks = []
    if not sysroot:
        # The REPL's Lean.findSysroot would then run `lean --print-prefix`.
        checks.append(
            Check(
                "lean",
                WARN,
                "[repl] env has no LEAN_SYSROOT: the REPL will spawn `lean "
                "--print-prefix` at start, which the spawn filter refuses; rerun "
                "`leanrpc setup`",
            )
        )
    else:
        checks.append(
            _version_check("lean", [str(Path(sysroot) / "bin" / "lean"), "--version"], config, cwd)
        )
    # Lean searches LEAN_PATH, then LEAN_SYSROOT/lib/lean; Init must be on it.
    search = [p for p in config.repl.env.get("LEAN_PATH", "").split(os.pathsep) if p]
    if sysroot:
        search.append(str(Path(sysroot) / "lib" / "lean"))
    found = next((p for p in search if (Path(p) / "Init.olean").is_file()), None)
    if found is None:
        checks.append(
            Check(
                "lean-path",
                FAIL,
                f"Init.olean is in none of {search or '(empty LEAN_PATH)'}; "
                "rerun `leanrpc setup` after changing the project",
            )
        )
    else:
        missing = sum(not Path(p).is_dir() for p in search)
        checks.append(
            Check(
                "lean-path",
                OK,
                f"{len(search)} search directories ({missing} not built yet), Init in {found}",
            )
        )
    return checks


def _check_spawn_filter(config: Config) -> Check:
    from ..security.sandbox import resolve_block_spawn

    try:
        on, why = resolve_block_spawn(config)
    except Exception as exc:  # a doctor reports, it does not crash
        return Check("spawn filter", FAIL, f"{type(exc).__name__}: {exc}")
    if on:
        return Check("spawn filter", OK, f"on when the sandbox runs ({why})")
    hint = (
        "; `leanrpc setup` without --via-lake writes a config that keeps it on"
        if "lake" in why
        else ""
    )
    return Check("spawn filter", WARN, f"off ({why}){hint}")


def _child_env(config: Config) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.update(config.repl.env)
    return env


async def _check_repl(config: Config, result: DoctorReport, header: str, emit) -> None:
    from ..pool import Pool
    from ..security.sandbox import make_sandbox_launcher
    from ..services.verify import VerifyOptions, VerifyService

    probe_config = copy.deepcopy(config)
    probe_config.pool.workers = 1
    probe_config.pool.min_warm = 1
    probe_config.pool.warm_headers = []
    probe_config.pool.warm_spares = 0
    pool = Pool(probe_config, make_sandbox_launcher(probe_config))
    started = time.monotonic()
    try:
        await pool.start()
        if pool.identity is None:
            emit(
                result.add(
                    "handshake", FAIL, pool.snapshot().not_serving_reason or "no worker booted"
                )
            )
            return
        identity = pool.identity
        result.verifier_kind = identity.kind
        result.lean_version = identity.lean_version
        took = time.monotonic() - started
        if identity.kind == STAND_IN_KIND:
            emit(
                result.add(
                    "handshake",
                    WARN,
                    f"STAND-IN, not Lean: {identity.description} ({took:.1f} s). Its results are "
                    "test-double verdicts; configure a real REPL with `leanrpc setup`.",
                )
            )
        else:
            emit(
                result.add(
                    "handshake",
                    OK,
                    f"Lean {identity.lean_version}: {identity.description} ({took:.1f} s)",
                )
            )
        if identity.warning:  # issue 25 item 6: which kernel soundness fix is missing
            emit(result.add("soundness", WARN, identity.warning))
        code = (f"{header}\n\n" if header else "") + "example : True := trivial\n"
        verify = VerifyService(pool, probe_config)
        answer = await verify.verify(
            "doctor", code, VerifyOptions(timeout_s=probe_config.pool.header_timeout_s)
        )
        label = f"import ({header or 'no header'})"
        if answer.status.name != "VALID":
            emit(
                result.add(
                    label,
                    FAIL,
                    f"{answer.status.name}: {answer.error or [m.text for m in answer.messages]}",
                )
            )
            return
        result.import_seconds = answer.timings.header_s
        worker = next((w for w in pool.metrics().workers if w.name == answer.reuse.worker), None)
        rss = worker.memory_bytes if worker is not None else 0
        result.import_rss_mb = rss / 2**20 if rss else None
        memory = f", worker memory {result.import_rss_mb:.0f} MB" if result.import_rss_mb else ""
        emit(result.add(label, OK, f"loaded in {answer.timings.header_s:.2f} s{memory}"))
    except Exception as exc:  # a doctor reports, it does not crash
        emit(result.add("handshake", FAIL, f"{type(exc).__name__}: {exc}"))
    finally:
        await pool.close(5.0)


def add_parser(sub):
    parser = sub.add_parser(
        "doctor",
        help="check the configured REPL: versions, handshake, import time and memory",
        description="Check a configured REPL before serving it: command, versions, sandbox, handshake, "
        "and the time (seconds) and memory (MB) of loading an import header.",
    )
    parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    parser.add_argument(
        "--repl-cmd",
        metavar="CMD",
        type=argtypes.command_line,
        help="REPL command line instead of the config's (default: the config's)",
    )
    parser.add_argument(
        "--header",
        help='header to time (default: "import Mathlib" for Mathlib projects, else none)',
    )
    parser.add_argument(
        "--require-lean",
        action="store_true",
        help="fail when the REPL is the stand-in (default: warn)",
    )
    return parser


def run(args) -> int:
    return main_doctor(args)


def main_doctor(args) -> int:
    """Entry point for `leanrpc doctor`: 0 when healthy, 1 otherwise."""
    config, _path = load(args.config)
    if getattr(args, "repl_cmd", None) is not None:
        config.repl.command = args.repl_cmd
    report = asyncio.run(
        run_doctor(config, header=args.header, report=lambda line: print(line, flush=True))
    )
    if report.is_stand_in:
        print("verifier: leanrpc stand-in (no Lean toolchain configured)", flush=True)
        if args.require_lean:
            print("FAIL --require-lean: the configured REPL is the stand-in", file=sys.stderr)
            return 1
    elif report.verifier_kind:
        print(f"verifier: Lean {report.lean_version}", flush=True)
    return 0 if report.ok else 1
