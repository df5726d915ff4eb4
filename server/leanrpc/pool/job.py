"""Jobs by kind, and what each gives back: the data the pool's rooms hand each other.

Owns the three kinds of job and their typed outcomes:

    BodyJob     a body, elaborated on the env of its header and preamble, with
                its after-body checks (`#print axioms`, reference queries)
                                                        -> BodyOutcome
    SessionJob  a command on a session env (the session's missing commands
                replayed first where the worker lacks them)
                                                        -> SessionOutcome
    CallJob     a `WorkerCall` (the Prover's own requests) on a reserved
                worker, through a restricted `pool.slot.WorkerHandle`
                                                        -> CallOutcome

`Job` is what the kinds share: the header split and time limits, who sent it
(fair admission), and `text` and `scope`, computed once at construction. A
job is frozen: it is what a service asks for, never the pool's run record.
The pool's bookkeeping (when it was accepted, its future, attempts, the
current `Attempt`, the routing view) is a pool-private `Ticket`
(pool/ticket.py) that `Pool.submit` makes and admission queues. May import:
core, pool.plan (the job kinds), pool.sessions (the session call type). No
asyncio logic lives here.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Generic, Protocol, TypeVar

from .. import repl
from ..core.headers import HeaderSplit
from .plan import JobKind
from .sessions import SessionCall

__all__ = [
    "BodyJob",
    "BodyOutcome",
    "CallJob",
    "CallOutcome",
    "Job",
    "SessionJob",
    "SessionOutcome",
    "WorkerCall",
    "profile_key",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class WorkerCall(Protocol[T_co]):
    """Work that runs its own REPL requests on a worker instead of a body.

    The pool boots the worker and loads the job's header and preamble as for
    any job, then awaits `run(handle, base_env, timeout)` with the worker
    reserved for it alone; `handle` is a `pool.slot.WorkerHandle` (requests,
    the slot's realizations, a taint mark: never the Worker), and the value
    returned is the outcome's `value`. Routing treats it like a session job:
    `held_chars(worker_name)` is how much of `text` (the work to rebuild from
    nothing) that worker already holds, so the job goes to the holder unless
    the holder is busy and the measured cost of rebuilding the rest elsewhere
    (the call's own `char_s` when it has one, else the prefix-routing cost
    model) is less than the expected wait, ski rental included. A
    `WorkerCrashed` raised by `run` retries the job like a crashed body.
    """

    scope: str  # what the work is about, the same on every worker
    text: str  # the work to redo on a worker that holds none of it
    # Optional `char_s`: seconds per character of `text` as measured for this kind of
    # work (None or absent: the body cost model prices it), read once at submit.

    def held_chars(self, worker_name: str) -> int: ...

    async def run(self, worker: Any, base_env: int, timeout: float) -> T_co: ...


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class Job:
    """What every kind shares, frozen: what a service asks for. `text`, `scope`
    and `import_key` are computed once at construction: routing reads them many
    times per dispatch pass over up to 256 queued jobs."""

    KIND = JobKind.BODY

    split: HeaderSplit
    timeout_s: float
    reuse: bool = True
    deadline: float | None = None  # time.monotonic() based
    # Fair admission: who sent it, and which stream or batch of theirs.
    client_id: str = ""
    stream_id: str = ""
    # The REPL profile (`[repl.<name>]`) to run on; "" is the default `[repl]`.
    profile: str = ""
    # Retire the worker after this job (a trusted client's code ran in it; services.resolve).
    retire_worker: bool = False
    # Another idle worker of the header is preferred to this one (a routing hint).
    avoid_worker: str = ""
    text: str = dataclasses.field(init=False)
    scope: str = dataclasses.field(init=False)
    # The header as the pool keys it: its imports, qualified by the profile (envs of
    # different toolchains never mix).
    import_key: str = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        # The command this job elaborates, and what it is elaborated on in
        # worker-independent terms (derived fields of a frozen job: set once here).
        object.__setattr__(self, "text", self.split.padded_body)
        object.__setattr__(self, "import_key", profile_key(self.profile, self.split.import_key))
        object.__setattr__(self, "scope", f"{self.import_key}\x01{self.split.preamble_key}")

    def char_s(self) -> float | None:
        """Seconds per character of `text` for routing; None: the body cost model's."""
        return None


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class _CommandJob(Job):
    """A command elaborated on an env (a body's or a session's)."""

    infotree: str | None = None
    # The REPL command options the caller asked for (issue 41; REPL-PROTOCOL.md 4.2, 11).
    all_tactics: bool = False
    root_goals: bool = False
    declarations: bool = False
    # Command run on the command's env right after it (e.g. `#print axioms`).
    after_body: str | None = None

    def apart(self) -> list[str]:
        """The after-body commands sent as commands of their own, in the order their answers come."""
        return [self.after_body] if self.after_body else []

    def sent_text(self) -> str:
        """The command text sent for it."""
        return self.text

    def split_answer(self, response: repl.Response) -> tuple[repl.Response, list | None]:
        """(its own answer, [after_body's answer, reference_query's answer]) from the
        answer to `sent_text()`; None for the second when no command rode in it."""
        return response, None


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class BodyJob(_CommandJob):
    """One body to elaborate on the env of its header and preamble."""

    # The statement queries of a reference check (leanrpc.reference), run
    # on the body's env after `after_body`; its answer is kept apart.
    reference_query: str | None = None
    # The command text sent, and the line each after-body command starts on in it
    # when they ride inline (derived once, at construction).
    _sent: str = dataclasses.field(init=False, repr=False)
    _check_lines: tuple[int, ...] = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        follow = self.follow() if self.inline else []
        sent = repl.trailing.append(self.text, follow) if follow else self.text
        object.__setattr__(self, "_sent", sent)
        object.__setattr__(self, "_check_lines", tuple(repl.trailing.starts(self.text, follow)))

    @property
    def inline(self) -> bool:
        """Its after-body commands ride in its own command (repl.trailing: one exchange
        and one env per body) rather than as commands of their own: a body whose
        answer is only messages and sorries. An infotree, tactics, root goals or
        declarations asked for would take in the checks' commands too."""
        return not (self.infotree or self.all_tactics or self.root_goals or self.declarations)

    def follow(self) -> list[str]:
        """The commands run on the body's env after it, in the order their answers
        come: `after_body`, then `reference_query`."""
        return [text for text in (self.after_body, self.reference_query) if text]

    def apart(self) -> list[str]:
        return [] if self.inline else self.follow()

    def sent_text(self) -> str:
        """`text`, with its after-body commands on the lines after it where they ride inline."""
        return self._sent

    def split_answer(self, response: repl.Response) -> tuple[repl.Response, list | None]:
        if not self._check_lines:
            return response, None
        body, answers = repl.trailing.split(response, self._check_lines)
        after = answers.pop(0) if self.after_body else None
        return body, [after, answers.pop(0) if self.reference_query else None]


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class SessionJob(_CommandJob):
    """`session.text` on a session env, not on the body's env."""

    KIND = JobKind.SESSION

    session: SessionCall

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "text", self.session.text)
        scope = f"{self.scope}\x01session:{self.session.session.uid}:{self.session.parent}"
        object.__setattr__(self, "scope", scope)


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class CallJob(Job, Generic[T]):
    """A `WorkerCall` (the Prover's work): the call runs instead of a body."""

    KIND = JobKind.CALL

    call: WorkerCall[T]

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "text", self.call.text)
        object.__setattr__(self, "scope", f"{self.scope}\x01call:{self.call.scope}")

    def char_s(self) -> float | None:
        return getattr(self.call, "char_s", None)


def profile_key(profile: str, import_key: str) -> str:
    """A header key qualified by its profile (the default profile: unchanged)."""
    return f"{profile}\x1d{import_key}" if profile else import_key


@dataclasses.dataclass
class _Ran:
    """Where and how long a job ran (every outcome has these)."""

    worker: str
    warm_header: bool
    queue_s: float
    header_s: float
    body_s: float
    attempts: int
    # Starting a fresh REPL for this job (a cold slot or a header switch).
    boot_s: float = 0.0


@dataclasses.dataclass(kw_only=True)
class BodyOutcome(_Ran):
    """A BodyJob's answer (repl.outcome.classify reads it)."""

    response: repl.Response
    after_response: repl.Response | None = None
    reused_prefix_chars: int = 0
    # Messages Lean gave for the job's open/set_option preamble (REPL JSON),
    # at their positions in the user's text; reported with the body's.
    preamble_messages: list = dataclasses.field(default_factory=list)
    # The answer to `BodyJob.reference_query`, and its REPL time.
    reference_response: repl.Response | None = None
    reference_s: float = 0.0


@dataclasses.dataclass(kw_only=True)
class SessionOutcome(BodyOutcome):
    """A SessionJob's answer: the body's, plus the new session env id (None if
    not recorded) and how many session commands were replayed first."""

    session_env: int | None = None
    replayed_commands: int = 0


@dataclasses.dataclass(kw_only=True)
class CallOutcome(_Ran, Generic[T]):
    """A CallJob's answer: what its `WorkerCall.run` returned."""

    value: T
