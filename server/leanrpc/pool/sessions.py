"""Named sessions: chains of commands that survive worker restarts.

A session is a tree of envs. Env 0 is the session's root (its creation code
run on its header); every later env is one command run on an earlier env.
The ids the client sees are *session* env ids, assigned here, never REPL env
ids: REPL ids die with their process. For each live worker the session keeps
which of its envs that process has built (`realized`). A request on env k
whose chain is not built on the chosen worker is preceded by a replay of the
missing commands, in order, so a kill -9 costs time but never an env id.

Memory: the registry holds at most `max_sessions` sessions and each at most
`max_commands` envs; both are refused beyond that (the client closes sessions
it no longer needs), never evicted, because an evicted session would break
the promise that its env ids stay valid.
"""

from __future__ import annotations

import dataclasses
import itertools
import time

from .. import repl
from ..core.headers import HeaderSplit
from ..errors import NotFoundError, OverloadedError, RequestError, WorkerDiverged

__all__ = ["Session", "SessionCall", "SessionRegistry", "ROOT_ENV"]

ROOT_ENV = 0


@dataclasses.dataclass(slots=True)
class SessionCommand:
    parent: int | None  # session env it ran on; None: the header/preamble env
    text: str | None    # command sent to the REPL; None: the env *is* the parent env


class Session:
    def __init__(self, name: str, split: HeaderSplit, profile: str = "") -> None:
        self.name = name
        self.split = split
        # The REPL profile it runs on, for life: its commands and replays run
        # on workers of that profile only (REPL envs never cross toolchains).
        self.profile = profile
        self.commands: list[SessionCommand] = []
        # worker name -> {session env id -> REPL env id on that worker}
        self.realized: dict[str, dict[int, int]] = {}
        self.created_at = time.monotonic()
        self.last_used = self.created_at
        self.replayed_commands = 0

    def has_env(self, env: int) -> bool:
        return 0 <= env < len(self.commands)

    def chain(self, env: int | None) -> list[int]:
        """Session env ids from the root down to `env` (empty for None)."""
        out = []
        while env is not None:
            out.append(env)
            env = self.commands[env].parent
        out.reverse()
        return out

    def forget_worker(self, worker_name: str) -> None:
        self.realized.pop(worker_name, None)


@dataclasses.dataclass
class SessionCall:
    """What a session job runs: `text` on session env `parent`.

    With `record` the resulting REPL env becomes a new session env (its id
    is returned in the outcome); without it (Verify with a session) the
    session is left unchanged.
    """

    session: Session
    parent: int | None
    text: str
    record: bool = True


class SessionRegistry:
    def __init__(self, max_sessions: int, max_commands: int) -> None:
        self.max_sessions = max_sessions
        self.max_commands = max_commands
        self._sessions: dict[str, Session] = {}
        self._names = itertools.count(1)

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self):
        return iter(list(self._sessions.values()))

    def create(self, name: str, split: HeaderSplit, profile: str = "") -> Session:
        if name in self._sessions:
            raise RequestError(f"a session named {name!r} is already open")
        if len(self._sessions) >= self.max_sessions:
            raise OverloadedError(
                f"{len(self._sessions)} sessions are open, the limit is {self.max_sessions}; close some",
                retry_after_s=5.0,
            )
        if not name:
            name = f"s{next(self._names)}"
            while name in self._sessions:
                name = f"s{next(self._names)}"
        session = Session(name, split, profile)
        self._sessions[name] = session
        return session

    def get(self, name: str) -> Session:
        session = self._sessions.get(name)
        if session is None:
            raise NotFoundError(f"unknown session {name!r} (never opened, or closed)")
        session.last_used = time.monotonic()
        return session

    def close(self, name: str) -> bool:
        return self._sessions.pop(name, None) is not None

    def check_env(self, session: Session, env: int) -> None:
        if not session.has_env(env):
            raise RequestError(f"session {session.name!r} has no env {env} (it has 0..{len(session.commands) - 1})")

    def check_room(self, session: Session) -> None:
        if len(session.commands) >= self.max_commands:
            raise OverloadedError(
                f"session {session.name!r} holds {len(session.commands)} envs, the limit is {self.max_commands}",
                retry_after_s=5.0,
            )

    def forget_worker(self, worker_name: str) -> None:
        for session in self._sessions.values():
            session.forget_worker(worker_name)


async def realize(session: Session, worker, base_env: int, env: int | None, timeout: float) -> tuple[int, int]:
    """The REPL env of session env `env` on `worker`, replaying what is missing.

    Returns (REPL env id, number of commands replayed).
    """
    if env is None:
        return base_env, 0
    built = session.realized.setdefault(worker.name, {})
    if env in built:
        return built[env], 0
    missing = []
    k: int | None = env
    while k is not None and k not in built:
        missing.append(k)
        k = session.commands[k].parent
    repl_env = base_env if k is None else built[k]
    for k in reversed(missing):
        command = session.commands[k]
        if command.text is not None:
            response = await worker.request(repl.command(command.text, repl_env), timeout)
            if response.env is None:
                # The command gave an env the first time; a different answer
                # now means this process is not a faithful copy: the runner
                # kills it (WorkerDiverged is a WorkerCrashed) and retries.
                raise WorkerDiverged(
                    f"replaying session {session.name!r} env {k} failed: {response.message!r}"
                )
            repl_env = response.env
        built[k] = repl_env
    session.replayed_commands += len(missing)
    return repl_env, len(missing)
