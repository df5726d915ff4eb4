"""How a REPL process is started, apart from what the pool decides.

A `Launcher` turns a `LaunchSpec` into a running child with stdin, stdout and
stderr pipes (jupyter_client's provisioner idea). The plain launcher applies
rlimits right after spawn with prlimit(2): `preexec_fn` is unsafe in a
threaded server (gRPC runs threads). The launchers the server uses live in
leanrpc.security (they add the monitor that dies with the server, the guard
and the sandbox) and implement the same interface. `kill_process_group` kills
a worker's whole tree, daemons included. Owns process start and kill; may
import config, worker.pipes (the child's pipes) and worker.proctree.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import signal

from ..config import LimitsConfig
from . import pipes, proctree
from .pipes import PipedProcess


@dataclasses.dataclass
class LaunchSpec:
    argv: list[str]
    cwd: str | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    # (resource, soft=hard limit) pairs applied to the child.
    rlimits: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    # Private scratch directory for the worker (sandboxes make it the only
    # writable place).
    scratch_dir: str | None = None


def rlimits_from_config(limits: LimitsConfig) -> list[tuple[int, int]]:
    pairs = []
    mb = 1024 * 1024
    if limits.address_space_mb:
        pairs.append((resource.RLIMIT_AS, limits.address_space_mb * mb))
    if limits.cpu_seconds:
        pairs.append((resource.RLIMIT_CPU, limits.cpu_seconds))
    if limits.max_processes:
        pairs.append((resource.RLIMIT_NPROC, limits.max_processes))
    if limits.max_file_size_mb:
        pairs.append((resource.RLIMIT_FSIZE, limits.max_file_size_mb * mb))
    if limits.max_open_files:
        pairs.append((resource.RLIMIT_NOFILE, limits.max_open_files))
    return pairs


class Launcher:
    """Starts REPL processes. Subclasses wrap argv (sandboxes) or set users."""

    name = "plain"

    def describe(self) -> str:
        return "no sandbox: workers run with the server's privileges"

    def wrap(self, spec: LaunchSpec) -> tuple[list[str], dict]:
        """Returns the final argv and extra keyword arguments for exec."""
        return list(spec.argv), {}

    def child_env(self, spec: LaunchSpec) -> dict[str, str]:
        env = dict(os.environ)
        env.update(spec.env)
        return env

    async def launch(self, spec: LaunchSpec) -> PipedProcess:
        argv, extra = self.wrap(spec)
        process = await spawn_with_pipes(argv, cwd=spec.cwd, env=self.child_env(spec), **extra)
        for which, value in spec.rlimits:
            try:
                resource.prlimit(process.pid, which, (value, value))
            except (ProcessLookupError, PermissionError, ValueError, OSError):
                # The child may already be gone (boot failure); the reader
                # reports that. A limit we may not set is not fatal either.
                pass
        return process


async def spawn_with_pipes(
    argv: list[str], *, cwd: str | None, env: dict[str, str], **extra
) -> PipedProcess:
    """The child in its own process group, with our three pipes (worker/pipes.py)."""
    return await pipes.spawn_with_pipes(argv, cwd=cwd, env=env, **extra)


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, via /proc/<pid>/task/*/children (parents first): worker/proctree.py."""
    return proctree.descendants(pid)


def kill_process_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signals the worker's process group; SIGKILL also reaches every descendant.

    A descendant that started its own session (a daemon) is out of the group
    but still below the worker's monitor (a child subreaper), so it is found
    and killed too, before the monitor itself.
    """
    if sig == signal.SIGKILL:
        for child in reversed(descendants(pid)):
            try:
                os.kill(child, sig)
            except (ProcessLookupError, PermissionError):
                pass
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


kill_process_tree = kill_process_group
