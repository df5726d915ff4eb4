"""Canaries: probes a worker cannot tell from client work, that catch a lying REPL.

Owns: when a worker gets a canary (`CanaryGuard.due`, pure: `[canary] rate`
per job, drawn at random so a REPL cannot count its way around them, and
always before a worker that served one client serves another; a pipelined
group's riders draw too, `riders_due`, so grouping never thins them), sending
one on the job's own header env right before the job (`CanaryGuard.before`,
`before_riders`), judging its answer (`holds`: an error in each false claim,
none elsewhere), and `CanaryFailed`, the error that poisons the worker. May
import: config, errors, repl, worker (types). What a canary
says comes through a narrow port, `CanarySource` (the services' writer,
services/canary.py, handed to the Pool by the composition root): the pool
knows the text and whether it holds, nothing else.

Why (issue 43 item 5): the code policy is the only barrier before the REPL.
Once code gets past it (a glued `#eval` the policy misread), the REPL process
can lie about every later command, other clients' included, and its forged
answers pass the fence (the fence proves which command a frame answers, not
that Lean wrote it). A canary is a few statements whose truth the pool
knows, at least one true and one false: the false ones must come back with
an error, the true ones without. A wrong answer means
the process lies: `CanaryFailed` makes the runner kill it as POISONED (its
ON_FAILURE row), which withdraws every cache entry it produced
(cache/provenance.py: all of its life, which covers those since its last
passed canary), and the client's job runs again on another process.

Canary work is never a job: it is not admitted, queued, counted in the
client's stats, the cost model or the prefix index, never cached and never
answered to anyone; it runs on the header env (the same header as the job,
none of the client's text) and its env is never used again.

Limit: a liar that lies only about its own client's snippets, or only about
text unlike a canary, is not caught (docs/SECURITY.md).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
import weakref
from typing import TYPE_CHECKING, NamedTuple, Protocol

from .. import repl
from ..errors import WorkerCrashed, WorkerError

if TYPE_CHECKING:
    from ..config import CanaryConfig
    from ..worker.worker import Worker
    from .job import Job

__all__ = [
    "CanaryFailed",
    "CanaryGuard",
    "CanaryProbe",
    "CanarySource",
    "CanaryStats",
    "Claim",
    "due",
    "holds",
]

log = logging.getLogger("leanrpc.pool")

RATE = "rate"
CLIENT_SWITCH = "client switch"


class Claim(NamedTuple):
    """One declaration of a canary: its lines (1-based, inclusive) and whether it holds."""

    first_line: int
    last_line: int
    holds: bool


class CanaryProbe(NamedTuple):
    """One canary: Lean text of a few declarations, at least one true and one false.

    Both kinds in every canary: a REPL that strips errors is caught by the false
    one, a REPL that refuses whatever looks like a canary by the true one."""

    text: str
    claims: tuple[Claim, ...]


class CanarySource(Protocol):
    """Writes canaries (services/canary.py): fresh names and layout each time."""

    def make(self) -> CanaryProbe: ...


class CanaryFailed(WorkerCrashed):
    """A worker answered a canary wrong: it lies. The runner kills it as POISONED."""


@dataclasses.dataclass
class CanaryStats:
    sent: int = 0
    passed: int = 0
    failed: int = 0  # wrong answers: each poisoned its worker
    lost: int = 0  # no answer (timeout, crash): the worker is replaced, nothing judged
    seconds: float = 0.0  # REPL wall time spent on canaries (their cost)
    by_reason: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Mark:
    """What the guard knows of one worker: the client it served last, and whether its
    current job came after a canary."""

    client: str | None = None
    sent: bool = False


def due(
    last_client: str | None, client: str, draw: float, rate: float, on_switch: bool
) -> str | None:
    """Why a job of `client` on a worker that last served `last_client` gets a
    canary first (RATE or CLIENT_SWITCH), or None. `draw` is uniform in [0, 1)."""
    if on_switch and last_client is not None and last_client != client:
        return CLIENT_SWITCH
    if draw < rate:
        return RATE
    return None


def riders_due(draw: float, rate: float, riders: int, lead_had_one: bool) -> str | None:
    """Whether a pipelined group's `riders` get a canary before its exchange (RATE), or None:
    when the lead had none, with the chance that one of them alone would have drawn one,
    1 - (1 - rate) ** riders, so a group gets a canary exactly when one of its bodies'
    draws would have given one, and pipelining thins them no more than running alone."""
    if lead_had_one or riders <= 0:
        return None
    return RATE if draw < 1.0 - (1.0 - rate) ** riders else None


def holds(response: repl.Response, probe: CanaryProbe) -> bool:
    """Whether the REPL's answer is the true one: an env, no sorry, an error in
    every false claim and none anywhere else (what real Lean answers)."""
    if response.env is None or response.sorries:
        return False
    lines = {_line(m) for m in response.messages if m.severity == "error"}
    for claim in probe.claims:
        inside = any(
            line is not None and claim.first_line <= line <= claim.last_line for line in lines
        )
        if inside == claim.holds:
            return False
    spans = [(c.first_line, c.last_line) for c in probe.claims if not c.holds]
    return all(line is not None and any(a <= line <= b for a, b in spans) for line in lines)


def _line(message) -> int | None:
    pos = message.pos
    return None if pos is None else int(pos.line)


class CanaryGuard:
    """Decides and sends canaries for the runner (one per pool)."""

    def __init__(
        self,
        config: CanaryConfig,
        source: CanarySource | None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.source = source if config.enabled else None
        self.stats = CanaryStats()
        # Unpredictable draws: a REPL must not learn which job comes with a canary.
        self._rng = rng or random.SystemRandom()
        # Dies with the Worker object: nothing to forget by hand.
        self._marks: weakref.WeakKeyDictionary[Worker, _Mark] = weakref.WeakKeyDictionary()

    async def before(self, job: Job, worker: Worker) -> None:
        """A canary on `worker` before `job`, when one is due. Raises
        CanaryFailed on a wrong answer, WorkerCrashed when none came back."""
        if self.source is None:
            return
        mark = self._marks.setdefault(worker, _Mark())
        reason = due(
            mark.client,
            job.client_id,
            self._rng.random(),
            self.config.rate,
            self.config.on_client_switch,
        )
        mark.client = job.client_id
        mark.sent = False
        if reason is not None:
            mark.sent = await self._send(reason, job, worker)

    async def before_riders(self, job: Job, worker: Worker, riders: int) -> None:
        """The draws of the `riders` that `job` leads (queued jobs of its client and
        stream run in its one exchange, pool/pipeline.py), after `before` drew the lead's
        (`riders_due`). Raises as `before` does; the riders then go back to the queue."""
        if self.source is None:
            return
        mark = self._marks.setdefault(worker, _Mark())
        reason = riders_due(self._rng.random(), self.config.rate, riders, mark.sent)
        if reason is not None:
            mark.sent = await self._send(reason, job, worker)

    async def _send(self, reason: str, job: Job, worker: Worker) -> bool:
        """A canary for `reason` on `job`'s header env (False: the worker holds none, so
        none was sent). Raises as `before` says."""
        env = worker.header_env(job.import_key)
        if env is None or self.source is None:
            return False
        probe = self.source.make()
        self.stats.sent += 1
        self.stats.by_reason[reason] = self.stats.by_reason.get(reason, 0) + 1
        started = time.monotonic()
        try:
            response = await worker.request(repl.command(probe.text, env), self.config.timeout_s)
        except WorkerCrashed:
            self.stats.lost += 1
            raise
        except WorkerError as exc:  # out of time or memory: replace it, retry the job
            self.stats.lost += 1
            raise WorkerCrashed(f"worker {worker.name} gave no answer to a canary: {exc}") from exc
        self.stats.seconds += time.monotonic() - started
        if holds(response, probe):
            self.stats.passed += 1
            return True
        self.stats.failed += 1
        log.warning("canary (%s): worker %s answered it wrong; poisoning it", reason, worker.name)
        raise CanaryFailed(f"worker {worker.name} answered a canary wrong; it is replaced")
