"""Named sessions: chains of commands that survive worker restarts.

A session is a tree of envs. Env 0 is the session's root (its creation code
run on its header); every later env is one command run on an earlier env.
The ids the client sees are *session* env ids, assigned here, never REPL env
ids: REPL ids die with their process. For each live worker the session keeps
which of its envs that process has built (`realized`, written through the
worker's slot, which drops it when the worker dies: pool/slot.py). A request
on env k whose chain is not built on the chosen worker is preceded by a
replay of the missing commands, in order (pool/replay.py), so a kill -9
costs time but never an env id.

Owners: a session belongs to the identity that opened it (edge/identity.py).
Names are per owner: another identity's session of that name, for every
call (run, verify in it, close), is the same NotFoundError as a name never
opened, so no call tells whether someone else holds a name. Names the server
makes up are `secrets.token_urlsafe`, not a counter.

Memory: the registry holds at most `max_sessions` sessions in all and each at
most `max_commands` envs; per owner at most `max_per_client` sessions and
`max_bytes_per_client` bytes, and all owners together `max_bytes_total`
bytes (issue 44 item 2). The bytes are what the server really holds for the
session's code (its header and every command it recorded), `held_cost`, not
the code's length; a command's cost is reserved while it runs, so concurrent
commands cannot overshoot. A refusal names the limit that was hit. All are refused beyond that (the
client closes sessions it no longer needs), never evicted, because an
evicted session would break the promise that its env ids stay valid. One
owner at its limits leaves every other owner's room untouched: `from_config`
clamps `max_per_client` to half of `max_sessions` (at least 1), so one owner
can never hold the total (issue 43: with the total at 16 and a per-client
limit of 32, one client took every session), and logs the clamp at start-up.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import re
import secrets
import time

from ..core.headers import HeaderSplit
from ..errors import NotFoundError, OverloadedError, RequestError

__all__ = ["Session", "SessionCall", "SessionRegistry", "ROOT_ENV", "per_client_limit", "held_cost"]

log = logging.getLogger("leanrpc.pool")


def per_client_limit(max_per_client: int, max_sessions: int) -> int:
    """The sessions one owner may hold: `max_per_client`, at most half the total
    (at least 1), so another owner always finds room."""
    return max(1, min(max_per_client, max_sessions // 2))


ROOT_ENV = 0


@dataclasses.dataclass(slots=True)
class SessionCommand:
    parent: int | None  # session env it ran on; None: the header/preamble env
    text: str | None  # command sent to the REPL; None: the env *is* the parent env


class Session:
    def __init__(
        self,
        name: str,
        split: HeaderSplit,
        profile: str = "",
        owner: str = "",
        header_bytes: int = 0,
    ) -> None:
        self.name = name
        self.owner = owner  # the identity that opened it (edge/identity.py)
        # Names are per owner; this one is the server's, for routing scopes.
        self.uid = secrets.token_hex(8)
        self.split = split
        # Bytes of session code the server keeps for it: the header, then each recorded command.
        self.held_bytes = header_bytes
        # The REPL profile it runs on, for life: its commands and replays run
        # on workers of that profile only (REPL envs never cross toolchains).
        self.profile = profile
        self.commands: list[SessionCommand] = []
        # worker name -> {session env id -> REPL env id on that worker}; written
        # only through the worker's slot (pool/slot.py), which drops its entry.
        self.realized: dict[str, dict[int, int]] = {}
        self.created_at = time.monotonic()
        self.last_used = self.created_at
        self.replayed_commands = 0

    def record(self, parent: int | None, text: str | None) -> int:
        """Appends a command (a new env); returns its session env id."""
        self.commands.append(SessionCommand(parent, text))
        self.held_bytes += held_cost(text or "")
        return len(self.commands) - 1

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


def code_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


# Copies of a session's code the server holds, measured (issue 44, tracemalloc
# and RSS in benchmarks/memory_bench.py): the recorded command's str, the pool
# prefix trie's edge and the worker history trie's edge (pool/prefix_index.py,
# str slices of the key's width), and the history's key str; plus one for what
# rides with them (a str's cached UTF-8 once C code asked for it, the last
# request's encoding, the allocator's slack).
HELD_COPIES = 5

_WIDE = re.compile("[\U00010000-\U0010ffff]")
_TWO_BYTES = re.compile("[\u0100-\uffff]")


def str_bytes(text: str) -> int:
    """Bytes CPython stores `text`'s characters in: 1, 2 or 4 a character by its
    widest one (PEP 393), found with C-speed regex scans. Not sys.getsizeof,
    which also counts a UTF-8 copy cached by whoever encoded the str last."""
    if text.isascii():
        return len(text)
    if _WIDE.search(text):
        return 4 * len(text)
    return (2 if _TWO_BYTES.search(text) else 1) * len(text)


def held_cost(text: str) -> int:
    """Bytes the server holds for session code `text`: HELD_COPIES of its characters."""
    return HELD_COPIES * str_bytes(text)


class SessionRegistry:
    def __init__(
        self,
        max_sessions: int,
        max_commands: int,
        *,
        max_per_client: int = 1_000_000,
        max_bytes_per_client: int = 2**62,
        max_bytes_total: int = 2**62,
    ) -> None:
        self.max_sessions = max_sessions
        self.max_commands = max_commands
        self.max_per_client = max_per_client
        self.max_bytes_per_client = max_bytes_per_client
        self.max_bytes_total = max_bytes_total
        self._sessions: dict[tuple[str, str], Session] = {}  # (owner, name) -> session
        self._per_owner: collections.Counter[str] = collections.Counter()
        self._reserved: collections.Counter[str] = (
            collections.Counter()
        )  # bytes of commands running

    @classmethod
    def from_config(cls, config) -> "SessionRegistry":
        """`[pool] max_sessions, max_session_commands` and `[sessions]`;
        `sessions.max_per_client` clamped by `per_client_limit` (logged)."""
        total, asked = config.pool.max_sessions, config.sessions.max_per_client
        per_client = per_client_limit(asked, total)
        if per_client != asked and total > 0:
            log.warning(
                "sessions.max_per_client = %d is more than half of pool.max_sessions = %d: "
                "one client could hold every session; using %d per client",
                asked,
                total,
                per_client,
            )
        return cls(
            total,
            config.pool.max_session_commands,
            max_per_client=per_client,
            max_bytes_per_client=config.sessions.max_mb_per_client * 2**20,
            max_bytes_total=config.sessions.max_mb_total * 2**20,
        )

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self):
        return iter(list(self._sessions.values()))

    def open_by(self, owner: str) -> int:
        return self._per_owner[owner]

    def held_bytes(self, owner: str) -> int:
        """Session code bytes `owner`'s sessions hold, with those of its running commands."""
        held = sum(s.held_bytes for (who, _name), s in self._sessions.items() if who == owner)
        return held + self._reserved[owner]

    def held_total(self) -> int:
        """Bytes all sessions hold, with those of running commands."""
        return sum(s.held_bytes for s in self._sessions.values()) + sum(self._reserved.values())

    def create(
        self,
        name: str,
        split: HeaderSplit,
        profile: str = "",
        *,
        owner: str = "",
        header_bytes: int = 0,
        opening_bytes: int = 0,
    ) -> Session:
        """A new session of `owner`; `opening_bytes` (its whole opening code)
        must fit in what `owner` may still hold."""
        if (owner, name) in self._sessions:
            raise RequestError(f"a session named {name!r} is already open")
        if self._per_owner[owner] >= self.max_per_client:
            raise OverloadedError(
                f"this client has {self._per_owner[owner]} sessions open, the limit is {self.max_per_client} "
                "(sessions.max_per_client); close some",
                retry_after_s=5.0,
            )
        if len(self._sessions) >= self.max_sessions:
            raise OverloadedError(
                f"{len(self._sessions)} sessions are open, the limit is {self.max_sessions}; close some",
                retry_after_s=5.0,
            )
        self._check_bytes(owner, opening_bytes)
        while not name or (owner, name) in self._sessions:
            name = "s-" + secrets.token_urlsafe(12)
        session = Session(name, split, profile, owner, header_bytes)
        self._sessions[(owner, name)] = session
        self._per_owner[owner] += 1
        return session

    def get(self, name: str, owner: str) -> Session:
        """`owner`'s session `name`; NotFoundError, the same for any other owner's."""
        session = self._sessions.get((owner, name))
        if session is None:
            raise NotFoundError(f"unknown session {name!r} (never opened, or closed)")
        session.last_used = time.monotonic()
        return session

    def close(self, name: str, owner: str) -> bool:
        """Closes `owner`'s session `name`; False when it has none of that name."""
        if self._sessions.pop((owner, name), None) is None:
            return False
        self._per_owner[owner] -= 1
        if self._per_owner[owner] <= 0:
            del self._per_owner[owner]
        return True

    def check_env(self, session: Session, env: int) -> None:
        if not session.has_env(env):
            raise RequestError(
                f"session {session.name!r} has no env {env} (it has 0..{len(session.commands) - 1})"
            )

    def check_room(self, session: Session, incoming_bytes: int = 0) -> None:
        """OverloadedError unless `session` may record one more command of `incoming_bytes`."""
        if len(session.commands) >= self.max_commands:
            raise OverloadedError(
                f"session {session.name!r} holds {len(session.commands)} envs, the limit is {self.max_commands}",
                retry_after_s=5.0,
            )
        self._check_bytes(session.owner, incoming_bytes)

    def _check_bytes(self, owner: str, incoming: int) -> None:
        held = self.held_bytes(owner)
        if held + incoming > self.max_bytes_per_client:
            raise OverloadedError(
                f"this client's sessions hold {held / 2**20:.1f} MB; {incoming / 2**20:.1f} MB more is over "
                f"this client's limit of {self.max_bytes_per_client / 2**20:g} MB (sessions.max_mb_per_client); "
                "close some",
                retry_after_s=5.0,
            )
        total = self.held_total()
        if total + incoming > self.max_bytes_total:
            raise OverloadedError(
                f"all clients' sessions hold {total / 2**20:.1f} MB; {incoming / 2**20:.1f} MB more is over "
                f"the server's limit of {self.max_bytes_total / 2**20:g} MB (sessions.max_mb_total); "
                "retry when others have closed theirs",
                retry_after_s=5.0,
            )

    def reserve(self, owner: str, nbytes: int) -> None:
        """Counts a running command's bytes against `owner` until `unreserve`."""
        self._reserved[owner] += nbytes

    def unreserve(self, owner: str, nbytes: int) -> None:
        self._reserved[owner] -= nbytes
        if self._reserved[owner] <= 0:
            del self._reserved[owner]
