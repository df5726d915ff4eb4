"""Jobs and their outcomes: the data the pool's rooms hand each other.

Owns: `Job` (one body or session command to elaborate, or a `WorkerCall`)
and `BodyOutcome` (what running it produced), and the `WorkerCall` protocol:
the narrow API the Prover uses to run its own REPL requests on a worker. May import: core, results-free pool siblings
(`sessions` for the session call type). No asyncio logic lives here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any, Protocol

from ..core.headers import HeaderSplit
from .sessions import SessionCall


class WorkerCall(Protocol):
    """Work that runs its own REPL requests on a worker instead of a body.

    The pool boots the worker and loads the job's header and preamble as for
    any job, then awaits `run(worker, base_env, timeout)` with the worker
    reserved for it alone; its return value is the outcome's `response`.
    Routing treats it like a session job: `held_chars(worker_name)` is how
    much of `text` (the work to rebuild from nothing) that worker already
    holds, so the job goes to the holder unless the holder is busy and the
    measured per-character cost of rebuilding the rest elsewhere is less than
    the expected wait (the prefix-routing cost model, ski rental included).
    A `WorkerCrashed` raised by `run` retries the job like a crashed body.
    """

    scope: str  # what the work is about, the same on every worker
    text: str   # the work to redo on a worker that holds none of it

    def held_chars(self, worker_name: str) -> int: ...

    async def run(self, worker: Any, base_env: int, timeout: float) -> Any: ...


@dataclasses.dataclass(eq=False)
class Job:
    """One body to elaborate on the env of its header.

    `text` and `scope` are computed once at construction: routing reads them
    many times per dispatch pass over up to 256 queued jobs.
    """

    split: HeaderSplit
    timeout_s: float
    infotree: str | None = None
    reuse: bool = True
    # Command run on the body's env right after it (e.g. `#print axioms`).
    after_body: str | None = None
    # The statement queries of a reference check (leanrpc.reference), run
    # on the body's env after `after_body`; its answer is kept apart.
    reference_query: str | None = None
    deadline: float | None = None  # time.monotonic() based
    # Set for a session job: the command runs on a session env, not the body.
    session: SessionCall | None = None
    # Set for a WorkerCall job (the Prover): the call runs instead of a body.
    call: WorkerCall | None = None
    # Fair admission: who sent it, and which stream or batch of theirs.
    client_id: str = ""
    stream_id: str = ""
    # The REPL profile (`[repl.<name>]`) to run on; "" is the default `[repl]`.
    profile: str = ""
    # Another idle worker of the header is preferred to this one (a routing hint).
    avoid_worker: str = ""
    enqueued_at: float = dataclasses.field(default_factory=time.monotonic)
    # Set while the job waits for a busy prefix holder although an idle
    # worker of its header was free: since when, and for which prefix.
    wait_mark: float | None = None
    rent_key: int | None = None
    # Pool-trie entry added at launch: the worker will hold the text once it
    # is elaborated, so routing can wait for it instead of elaborating the
    # same file twice at once. Dropped if the request fails.
    inflight_key: str | None = None
    attempts: int = 0
    future: asyncio.Future | None = None
    task: asyncio.Task | None = None
    # Boot + header + preamble of the current attempt, run as its own task so
    # a cancel or deadline during it does not throw the load away.
    load: asyncio.Task | None = None
    text: str = dataclasses.field(init=False)
    scope: str = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        # The command this job elaborates, and what it is elaborated on in
        # worker-independent terms.
        self.text = self.session.text if self.session is not None else self.split.padded_body
        base = f"{self.import_key}\x01{self.split.preamble_key}"
        if self.call is not None:
            self.text = self.call.text
            base = f"{base}\x01call:{self.call.scope}"
        elif self.session is not None:
            base = f"{base}\x01session:{self.session.session.uid}:{self.session.parent}"
        self.scope = base

    @property
    def import_key(self) -> str:
        """The header as the pool keys it: its imports, qualified by the
        profile (envs of different toolchains never mix)."""
        return profile_key(self.profile, self.split.import_key)


def profile_key(profile: str, import_key: str) -> str:
    """A header key qualified by its profile (the default profile: unchanged)."""
    return f"{profile}\x1d{import_key}" if profile else import_key


@dataclasses.dataclass
class BodyOutcome:
    response: dict
    after_response: dict | None
    worker: str
    warm_header: bool
    reused_prefix_chars: int
    queue_s: float
    header_s: float
    body_s: float
    attempts: int
    # Starting a fresh REPL for this job (a cold slot or a header switch).
    boot_s: float = 0.0
    # Session jobs: the new session env id (None if not recorded), and how
    # many session commands had to be replayed on this worker first.
    session_env: int | None = None
    replayed_commands: int = 0
    # Messages Lean gave for the job's open/set_option preamble (REPL JSON),
    # at their positions in the user's text; reported with the body's.
    preamble_messages: list = dataclasses.field(default_factory=list)
    # The answer to `Job.reference_query` (REPL JSON), and its REPL time.
    reference_response: dict | None = None
    reference_s: float = 0.0
