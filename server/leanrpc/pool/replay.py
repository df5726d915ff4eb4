"""Realizing a chain on a slot: replay the missing steps, divergence is a dead worker.

Owns: the `Link` a chain supplies for each of its steps, `replay` (the one
loop that finds the deepest step a worker's slot holds and re-runs the rest
in order), and the sessions' chain (`session_links`, `realize_session`).
The Prover supplies its own links (services/prover/rebuild.py). May import:
errors, repl, pool.sessions (the Session type), pool.slot.

A chain is a path of steps from a root handle (a header or preamble env):
each step's REPL handle (an env, a proof state) is made by one request on
the previous step's handle, or comes with the previous step's answer (a
sorry that a tactic opened: `derived`), or is the previous handle itself (a
link whose `request` is None). A step answered differently from the first
time means the process is not a faithful copy: its link raises
WorkerDiverged (a WorkerCrashed), and the runner kills the worker and
retries the job elsewhere. Only the pool kills; this room only raises.
"""

from __future__ import annotations

from typing import Hashable, Protocol, Sequence

from .. import repl
from ..errors import WorkerDiverged
from .sessions import Session

__all__ = ["Link", "realize_session", "replay", "resume_point", "session_links"]


class Link(Protocol):
    key: Hashable  # the step's key in the slot's realizations of the chain
    derived: bool  # its handle comes with the previous step's answer

    def request(self, handle: int) -> repl.Request | None:
        """The request that makes this step on `handle`; None: the step is `handle` itself."""

    def accept(self, response: repl.Response, built: dict) -> int:
        """This step's handle from the REPL's answer; raises WorkerDiverged."""

    def missing(self) -> str:
        """Why a derived step that is not held means divergence."""


class Caller(Protocol):
    async def request(self, payload: repl.Request, timeout: float) -> repl.Response: ...


def resume_point(built: dict, links: Sequence[Link]) -> int:
    """How many leading steps need no replay: the deepest held step from which
    a replay can go on (not one whose next step is derived and not held)."""
    for k in range(len(links), 0, -1):
        if links[k - 1].key in built and (k == len(links) or not links[k].derived):
            return k
    return 0


async def replay(
    worker: Caller, built: dict, links: Sequence[Link], root: int, timeout: float
) -> tuple[int, int]:
    """The handle of the last step of `links` on `worker`, replaying what `built` lacks.

    Returns (handle, steps replayed). `built` is the slot's map for this
    chain (`Slot.built`); every step replayed is recorded in it.
    """
    if not links:
        return root, 0
    held = resume_point(built, links)
    handle = root if held == 0 else built[links[held - 1].key]
    replayed = 0
    for link in links[held:]:
        if link.derived:
            if link.key not in built:
                raise WorkerDiverged(link.missing())
            handle = built[link.key]
            continue
        payload = link.request(handle)
        if payload is not None:
            handle = link.accept(await worker.request(payload, timeout), built)
        built[link.key] = handle
        replayed += 1
    return handle, replayed


class _SessionLink:
    __slots__ = ("key", "derived", "_session", "_text")

    def __init__(self, session: Session, env: int) -> None:
        self.key = env
        self.derived = False
        self._session = session
        self._text = session.commands[env].text

    def request(self, handle: int) -> repl.Request | None:
        return None if self._text is None else repl.command(self._text, handle)

    def accept(self, response: repl.Response, built: dict) -> int:
        if response.env is None:
            # The command gave an env the first time; a different answer now
            # means this process is not a faithful copy.
            raise WorkerDiverged(
                f"replaying session {self._session.name!r} env {self.key} failed: "
                f"{response.message!r}"
            )
        return response.env

    def missing(self) -> str:  # pragma: no cover - session steps are never derived
        return f"session {self._session.name!r} env {self.key} is not held"


def session_links(session: Session, env: int | None) -> list[_SessionLink]:
    """The chain of session env `env`: its commands from the root down."""
    return [_SessionLink(session, k) for k in session.chain(env)]


async def realize_session(
    session: Session, worker, built: dict, base_env: int, env: int | None, timeout: float
) -> tuple[int, int]:
    """The REPL env of session env `env` on `worker`, replaying what is missing.

    `built` is the worker slot's map for the session (`Slot.built(session)`).
    Returns (REPL env id, number of commands replayed).
    """
    if env is not None and env in built:
        return built[env], 0
    repl_env, replayed = await replay(worker, built, session_links(session, env), base_env, timeout)
    session.replayed_commands += replayed
    return repl_env, replayed
