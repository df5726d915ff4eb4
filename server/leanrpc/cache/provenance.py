"""Which live worker produced which entries, so a poisoned worker's are withdrawn.

Owns the per-worker index of entries this server stored and the rule for a
worker's end; imports only this package's codec (the Provenance record).
Knows workers only by their name, pid and `exit_cause.value`, as the pool's
state listener hands them over (no import of worker or pool).

Why: a worker is poisoned when the channel catches its REPL lying (a forged
or second frame, a wrong fence, a failed /proc audit, an id it never
allocated). The lie is caught on the exchange where it happens, and that
exchange's answer is never delivered: the channel returns an answer only
after its fence answered and the post-exchange audit passed
(worker/channel.py), and a job's result is set only after every exchange of
the job (body, then `after_body` and the reference query) came back so
confirmed (pool/runner.py). That is as late as the exchange order allows: the
REPL's *next* job could be the first sign that code an earlier snippet ran
(a thread started by `#eval`) had been waiting. So when a worker is poisoned
every entry it produced in its life is withdrawn from memory, disk and Redis:
its last clean audit vouches for the exchange it followed, not for what the
process does later, and a miss costs one elaboration. Entries of a worker
that ended cleanly are forgotten here (it can no longer be poisoned).

Limit: another server that already copied such an entry from Redis into its
memory tier keeps it until evicted or restarted (docs/SECURITY.md).
"""

from __future__ import annotations

import uuid

from .codec import Provenance

POISON_CAUSES = frozenset({"poisoned", "garbage"})  # ExitCause values that withdraw
END_STATES = frozenset({"stopping", "dead"})  # WorkerState values of a worker's end


class ProvenanceIndex:
    """worker name -> {key: run} of the entries it produced, while it lives."""

    def __init__(self) -> None:
        self.server = uuid.uuid4().hex[:16]  # this server start
        self._by_worker: dict[str, dict[str, str]] = {}
        self._latest: dict[str, str] = {}  # key -> worker that produced its current entry
        self.poisoned: set[str] = set()  # names of poisoned workers (never reused)

    def provenance(self, worker: str, pid: int, policy: str) -> Provenance:
        return Provenance(server=self.server, worker=worker, pid=pid or 0, policy=policy or "proof")

    def may_store(self, worker: str) -> bool:
        """False for a worker already poisoned (its answer raced the poison)."""
        return worker not in self.poisoned

    def record(self, key: str, run: str, worker: str) -> None:
        if not worker:
            return
        self._by_worker.setdefault(worker, {})[key] = run
        self._latest[key] = worker

    def ended(self, worker: str, cause: str | None) -> dict[str, str]:
        """A worker stops. Returns {key: run} to withdraw when it was poisoned
        (only keys whose current entry is still its own), else {}."""
        produced = self._by_worker.pop(worker, {})
        mine = {key: run for key, run in produced.items() if self._latest.get(key) == worker}
        for key in mine:
            del self._latest[key]
        if cause in POISON_CAUSES:
            self.poisoned.add(worker)
            return mine
        return {}

    def __len__(self) -> int:
        return len(self._latest)
