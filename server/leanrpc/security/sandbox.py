"""Worker launch policy: which jail, which uid, what the worker may read.

`make_sandbox_launcher(config)` picks the launcher for `config.sandbox.mode`;
every launcher starts workers through `enter.py` (a monitor process that dies
with the server and takes the REPL's whole tree with it; see there). Owns the
plan handed to enter.py; may import config and worker.launcher.

* "unshare": new PID, mount, network, IPC and UTS namespaces, plus a user
  namespace when the server is not root (unprivileged user namespaces, as
  bubblewrap uses); a tmpfs root holding only the exposed paths, read-only; a
  private tmpfs scratch; rlimits; no capabilities; no_new_privs; seccomp.
  Root servers run each worker as a uid of its own; others as their own uid,
  which the PID namespace keeps from signalling anything outside.
  The server refuses to start if that cannot work.
* "auto" (default): "unshare" when it works on this machine, else no sandbox,
  with a warning in the log and the reason in ServerInfo.sandbox.
* "off": no jail, but the worker still runs in its own session, dies with the
  server, and a seccomp guard keeps it from signalling or ptracing the server.

`sandbox.block_spawn` adds a seccomp filter under which fork, vfork and
non-thread clone fail with EPERM: the REPL keeps its threads but cannot start
a process. "auto" leaves it off for a `lake` REPL command, since `lake env
repl` runs the REPL as a child.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import resource
import shutil
import subprocess
import sys

import psutil

from ..config import Config
from ..worker.launcher import Launcher, LaunchSpec, rlimits_from_config, spawn_with_pipes
from ..worker.pipes import PipedProcess
from .cgroups import WorkerCgroups

log = logging.getLogger("leanrpc.security")

ENTER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "enter.py")
# Far above login users and the usual subuid ranges (100000 + 65536 * k).
SANDBOX_UID_BASE = 1_800_000_000
SANDBOX_UID_SPAN = 100_000
# Environment the worker may see; everything else (tokens, cloud keys) stays out.
ENV_ALLOWED = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "LEANRPC_NO_EXTENSIONS",
)
ENV_ALLOWED_PREFIXES = ("LC_", "LEAN_", "ELAN_", "LAKE_", "LEANRPC_STANDIN_")
MODES = ("auto", "unshare", "off")
BLOCK_SPAWN_MODES = ("auto", "on", "off")
# REPL launchers that must spawn the REPL themselves ("auto" leaves spawning allowed).
SPAWNING_LAUNCHERS = ("lake",)


class SandboxUnavailable(RuntimeError):
    pass


def make_sandbox_launcher(config: Config) -> Launcher:
    mode = config.sandbox.mode
    if mode not in MODES:
        raise ValueError(f"sandbox.mode must be one of {', '.join(MODES)}, not {mode!r}")
    if config.sandbox.block_spawn not in BLOCK_SPAWN_MODES:
        raise ValueError(
            f"sandbox.block_spawn must be one of {', '.join(BLOCK_SPAWN_MODES)}, not {config.sandbox.block_spawn!r}"
        )
    if mode == "off":
        return GuardedLauncher(config)
    try:
        launcher = UnshareLauncher(config)
        launcher.probe()
        return launcher
    except SandboxUnavailable as exc:
        if mode == "unshare":
            raise
        log.warning("SANDBOX OFF: %s; workers run untrusted code with the server's privileges", exc)
        return UnsandboxedLauncher(
            config, f"no sandbox (auto: {exc}); workers run with the server's privileges"
        )


def resolve_block_spawn(config: Config) -> tuple[bool, str]:
    """(filter on?, why) for `sandbox.block_spawn` and the REPL command."""
    setting = config.sandbox.block_spawn
    if setting == "on":
        return True, "sandbox.block_spawn = on"
    if setting == "off":
        return False, "sandbox.block_spawn = off"
    program = os.path.basename(config.repl.command[0]) if config.repl.command else ""
    if program in SPAWNING_LAUNCHERS:
        return False, f"auto: the REPL command starts with {program!r}, which spawns the REPL"
    return True, "auto"


def memory_summary(config: Config | None) -> str:
    """What GetServerInfo().sandbox says about the per-worker memory limit in force."""
    if config is None:
        return ""
    mb = config.limits.max_worker_rss_mb
    if mb > 0:
        return f"; memory limit {mb} MB per worker tree (anonymous + shared memory + memfds)"
    return "; no per-worker memory limit"


def worker_cgroup(config: Config | None, userns: bool = False) -> tuple[str, str]:
    """(cgroup path for one more worker or "", what the description says about it)."""
    if config is None or userns:
        return "", ""
    groups = WorkerCgroups.shared()
    if groups is None:
        return "", ""
    nproc = config.limits.max_processes or max(512, 8 * (os.cpu_count() or 1))
    path = groups.new(max(0, config.limits.max_worker_rss_mb) * 2**20, nproc)
    return path, "; " + groups.describe()


def cgroup_summary(config: Config | None, userns: bool = False) -> str:
    groups = None if config is None or userns else WorkerCgroups.shared()
    return "; " + groups.describe() if groups is not None else ""


def server_identity() -> tuple[int, int]:
    """(pid, process group) the worker must never signal."""
    return os.getpid(), os.getpgid(0)


class GuardedLauncher(Launcher):
    """No jail (sandbox.mode = "off"), but never an orphan and never a threat to the server.

    The REPL runs under enter.py's monitor in its own session: it dies with the
    server (parent-death signal), its leftover descendants die with it, and a
    seccomp guard stops kill/tgkill/pidfd_open/ptrace aimed at the server.
    """

    def __init__(self, config: Config | None = None) -> None:
        self._config = config

    def describe(self) -> str:
        return (
            "no sandbox: workers run with the server's privileges (own session, die with the server, "
            "may not signal or ptrace it)"
            + memory_summary(self._config)
            + cgroup_summary(self._config)
        )

    def wrap(self, spec: LaunchSpec) -> tuple[list[str], dict]:
        server_pid, server_pgid = server_identity()
        plan = {
            "kind": "plain",
            "server_pid": server_pid,
            "server_pgid": server_pgid,
            "argv": list(spec.argv),
            "rlimits": list(spec.rlimits),
            "cgroup": worker_cgroup(self._config)[0],
        }
        return [sys.executable, "-I", "-S", ENTER_SCRIPT, json.dumps(plan)], {}

    async def launch(self, spec: LaunchSpec) -> PipedProcess:
        argv, extra = self.wrap(spec)
        # enter.py sets the rlimits in the REPL before its exec (no race with a fork).
        return await spawn_with_pipes(argv, cwd=spec.cwd, env=self.child_env(spec), **extra)


class UnsandboxedLauncher(GuardedLauncher):
    """The guarded launcher, saying why the sandbox is off (ServerInfo.sandbox)."""

    def __init__(self, config: Config | None, reason: str) -> None:
        super().__init__(config)
        self._reason = reason

    def describe(self) -> str:
        return self._reason + memory_summary(self._config) + cgroup_summary(self._config)


class _UidPool:
    """Hands out a uid no live process holds (ours or a stray child's)."""

    def __init__(self, base: int, span: int) -> None:
        self._base, self._span = base, span
        self._live: dict[int, PipedProcess | None] = {}

    def reserve(self) -> int:
        for uid, process in list(self._live.items()):
            if process is not None and process.returncode is not None:
                del self._live[uid]
        taken = set(self._live)
        for proc in psutil.process_iter(["uids"]):
            uids = proc.info.get("uids")
            if uids is not None and self._base <= uids.real < self._base + self._span:
                taken.add(uids.real)
        for uid in range(self._base, self._base + self._span):
            if uid not in taken:
                self._live[uid] = None
                return uid
        raise SandboxUnavailable("no free sandbox uid")

    def bind(self, uid: int, process: PipedProcess) -> None:
        self._live[uid] = process

    def release(self, uid: int) -> None:
        self._live.pop(uid, None)


class UnshareLauncher(Launcher):
    name = "unshare"

    def __init__(self, config: Config) -> None:
        if not sys.platform.startswith("linux"):
            raise SandboxUnavailable("namespaces need Linux")
        sandbox = config.sandbox
        self._config = config
        # Not root: an unprivileged user namespace (identity-mapped) instead of a uid switch.
        self.userns = os.geteuid() != 0
        self._fixed_user: tuple[int, int] | None = None
        if self.userns:
            if sandbox.user:
                raise SandboxUnavailable("sandbox.user needs a root server (it switches uid)")
            self._fixed_user = (os.getuid(), os.getgid())
        elif sandbox.user:
            try:
                entry = pwd.getpwnam(sandbox.user)
            except KeyError:
                raise SandboxUnavailable(f"sandbox.user {sandbox.user!r} does not exist") from None
            if entry.pw_uid == 0:
                raise SandboxUnavailable("sandbox.user must not be root")
            self._fixed_user = (entry.pw_uid, entry.pw_gid)
        self._uids = _UidPool(SANDBOX_UID_BASE, SANDBOX_UID_SPAN)
        # Where each worker's private tmpfs scratch appears, inside its own root
        # only: nothing is created on the host, so nothing is left behind.
        # (The host's $TMPDIR means nothing in there; /tmp of the new root is empty.)
        self.scratch_dir = os.path.join(sandbox.scratch_root or "/tmp", "leanrpc-scratch")
        self._token_env = config.server.auth_token_env
        self.block_spawn, self._block_spawn_reason = resolve_block_spawn(config)
        if not self.block_spawn:
            log.warning(
                "sandbox: workers may spawn processes (%s); they stay in the same namespaces, uid and rlimits",
                self._block_spawn_reason,
            )

    def describe(self) -> str:
        if self.userns:
            who = "the server's uid in an unprivileged user namespace"
        elif self._config.sandbox.user:
            who = f"user {self._config.sandbox.user}"
        else:
            who = f"a uid of its own ({SANDBOX_UID_BASE}+)"
        return (
            f"unshare sandbox: each worker runs as {who} without capabilities, in its own PID, mount, network, "
            f"IPC and UTS namespaces; no network; a read-only root holding only the REPL, its toolchain, "
            f"project and system libraries; a private {self._config.sandbox.scratch_mb} MB tmpfs scratch; "
            f"{self._spawn_summary()}; rlimits {self._rlimit_summary()}{memory_summary(self._config)}{cgroup_summary(self._config, self.userns)}"
        )

    def _spawn_summary(self) -> str:
        if self.block_spawn:
            return "process creation blocked by seccomp (threads allowed)"
        return f"process creation allowed ({self._block_spawn_reason})"

    def _rlimits(self, spec: LaunchSpec) -> list[tuple[int, int]]:
        pairs = dict(spec.rlimits or rlimits_from_config(self._config.limits))
        # Threads count towards RLIMIT_NPROC; Lean runs one per core and more.
        pairs.setdefault(resource.RLIMIT_NPROC, max(512, 8 * (os.cpu_count() or 1)))
        pairs.setdefault(resource.RLIMIT_CORE, 0)
        return sorted(pairs.items())

    def _rlimit_summary(self) -> str:
        names = {
            getattr(resource, n): n[len("RLIMIT_") :].lower()
            for n in dir(resource)
            if n.startswith("RLIMIT_")
        }
        return ", ".join(f"{names.get(k, k)}={v}" for k, v in self._rlimits(LaunchSpec(argv=[])))

    def child_env(self, spec: LaunchSpec) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if (k in ENV_ALLOWED or k.startswith(ENV_ALLOWED_PREFIXES)) and k != self._token_env
        }
        home = os.environ.get("HOME", "")
        if "ELAN_HOME" not in env and home and os.path.isdir(os.path.join(home, ".elan")):
            env["ELAN_HOME"] = os.path.join(home, ".elan")
        env.update(spec.env)
        env.pop(self._token_env, None)
        env["HOME"] = env["TMPDIR"] = self.scratch_dir
        return env

    def _exposed_paths(self, spec: LaunchSpec, env: dict[str, str]) -> list[str]:
        paths = [sys.prefix, sys.base_prefix, sys.exec_prefix]
        # The leanrpc package itself (the stand-in imports it).
        paths.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        if spec.cwd:
            paths.append(spec.cwd)
        if spec.argv:
            exe = shutil.which(spec.argv[0], path=env.get("PATH"))
            if exe:
                # The toolchain around a binary in bin/ (bin/..), e.g. an elan
                # toolchain; else the binary's own folder.
                folder = os.path.dirname(os.path.realpath(exe))
                paths.append(
                    os.path.dirname(folder) if os.path.basename(folder) == "bin" else folder
                )
        paths += [a for a in spec.argv[1:] if os.path.isabs(a) and os.path.exists(a)]
        if "ELAN_HOME" in env:
            paths.append(env["ELAN_HOME"])
        # Paths the worker is told about (LEAN_PATH, LEAN_SYSROOT, PYTHONPATH, ...).
        # (Not PATH: a search path for programs is no list of things the REPL needs.)
        for name, value in env.items():
            if name not in ("PATH", "HOME", "TMPDIR"):
                paths += [
                    p for p in value.split(os.pathsep) if os.path.isabs(p) and os.path.exists(p)
                ]
        if (
            "leanrpc.standin" in spec.argv
            or os.path.basename(spec.argv[0] if spec.argv else "") == "leanrpc-repl-standin"
        ):
            paths += _standin_fixtures()
        paths += self._config.sandbox.expose
        return paths

    def plan(self, spec: LaunchSpec, uid: int, gid: int) -> list[str]:
        env = self.child_env(spec)
        server_pid, server_pgid = server_identity()
        plan = {
            "kind": "sandbox",
            "server_pid": server_pid,
            "server_pgid": server_pgid,
            "userns": self.userns,
            "uid": uid,
            "gid": gid,
            "scratch": self.scratch_dir,
            "scratch_mb": self._config.sandbox.scratch_mb,
            "expose": self._exposed_paths(spec, env),
            "rlimits": self._rlimits(spec),
            "cwd": spec.cwd,
            "argv": list(spec.argv),
            "block_spawn": self.block_spawn,
            "env": env,
            "cgroup": worker_cgroup(self._config, self.userns)[0],
        }
        # -I: ignore PYTHON* and user site; -S: no site-packages needed.
        return [sys.executable, "-I", "-S", ENTER_SCRIPT, json.dumps(plan)]

    def _ids(self) -> tuple[int, int]:
        if self._fixed_user:
            return self._fixed_user
        uid = self._uids.reserve()
        return uid, uid

    async def launch(self, spec: LaunchSpec) -> PipedProcess:
        uid, gid = self._ids()
        try:
            # The helper gets the server's environment only to start Python;
            # the REPL gets plan["env"].
            process = await spawn_with_pipes(self.plan(spec, uid, gid), cwd=None, env=_helper_env())
        except BaseException:
            self._uids.release(uid)
            raise
        if not self._fixed_user:
            self._uids.bind(uid, process)
        return process

    def probe(self) -> None:
        """Starts one sandboxed `python -c` to prove the sandbox works here."""
        spec = LaunchSpec(argv=[sys.executable, "-I", "-S", "-c", "import os; print(os.getuid())"])
        uid, gid = self._ids()
        try:
            done = subprocess.run(
                self.plan(spec, uid, gid),
                env=_helper_env(),
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxUnavailable(f"sandbox probe failed: {exc}") from exc
        finally:
            self._uids.release(uid)
        if done.returncode != 0 or done.stdout.strip() != str(uid):
            detail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            raise SandboxUnavailable(f"sandbox probe failed: {detail}")


def _standin_fixtures() -> list[str]:
    """The stand-in's replay fixtures, where it looks for them: `shared/fixtures` above its package."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    while True:
        candidate = os.path.join(here, "shared", "fixtures")
        if os.path.isdir(candidate):
            return [candidate]
        parent = os.path.dirname(here)
        if parent == here:
            return []
        here = parent


def _helper_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
