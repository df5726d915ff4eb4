"""The REPL exchanges that set a worker up: the boot probes and a header's import.

Owns: what is asked of a new REPL before it serves (`boot_probes`: the
identity probe, the channel's audit switched on after it, the fork probe
when asked) and how a header import is proven to have loaded
(`import_header`: the import command, then a probe on its env; an import
Lean could not resolve still answers with an env, so the probe is what
tells). The Worker (worker/worker.py) decides when these run and records
what they found; the requests go through its rules (`request`: killed on
any doubt). Why a room of its own: the worker's room is its state machine;
these are the protocol's set-up steps, the same for every state.
May import: leanrpc.repl, leanrpc.errors, worker.channel (a type). Not the pool.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from .. import repl
from ..errors import HeaderLoadError

if TYPE_CHECKING:
    from .channel import Channel

__all__ = ["boot_probes", "import_header"]

Request = Callable[[repl.Request, float], Awaitable[repl.Response]]


async def boot_probes(
    channel: Channel, timeout: float, probe_fork: bool
) -> tuple[str, bool | None]:
    """The REPL's version string, and whether it is the augustepoiroux fork (None: not
    asked). Raises the channel's WorkerError as is."""
    response = await channel.exchange(repl.identity_probe(), timeout)
    await channel.enable_audit()
    is_fork = None
    if probe_fork:
        is_fork = repl.is_fork(await channel.exchange(repl.fork_probe(), timeout))
    return repl.version_from_probe(response), is_fork


async def import_header(request: Request, imports: str, timeout: float) -> int:
    """Imports a header next to those the process holds (a command without `env`)
    and proves it loaded; its env. HeaderLoadError when Lean refused it."""
    response = await request(repl.command(imports), timeout)
    failure = repl.header_failure(response)
    if failure is not None:
        raise HeaderLoadError(failure, messages=list(response.messages))
    probe = await request(repl.header_probe(response.env), timeout)
    if probe.env is None or probe.errors:
        detail = probe.message or "; ".join(m.data for m in probe.errors)
        raise HeaderLoadError(
            "header failed to load: an import could not be resolved (the REPL returned an "
            f"empty environment; probe said: {detail[:300]})"
        )
    return response.env
