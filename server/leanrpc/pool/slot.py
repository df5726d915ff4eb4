"""A slot per worker: every REPL handle the worker holds, dropped in one place.

Owns: `Slot` (one worker's REPL handles: the header envs its process imported,
the preamble envs it built with Lean's messages for them, and which chain
realizations it built: sessions' envs and proofs' states), `Slots` (the pool's
slots by worker name, and `drop`, called once at the worker's DEAD transition,
which also drops the worker's prefix-index entries), and `WorkerHandle`, the
restricted handle a `WorkerCall` or a recycle hook gets: it sends requests and
may mark the worker tainted, but cannot kill it, change its state or reach
the pool. May import: errors, repl, worker (states), pool.prefix_index.

REPL handles (env ids, proof state numbers) die with their process. Keeping
them all here means a dead worker's handles go away together: no store keeps
a number that now means nothing on a new process of the same name.

A chain (a `Session`, a `Proof`) keeps its realizations in its own
`realized` map, keyed by worker name, so routing and moves can ask "who
holds this"; it is written only through `Slot.built`, which records the chain
so that `drop` forgets it there.
"""

from __future__ import annotations

import collections
import weakref

from .. import repl
from ..worker.states import ExitCause
from .prefix_index import PrefixIndex

__all__ = ["Slot", "Slots", "WorkerHandle"]

# Preamble envs kept per worker (least recently used dropped).
PREAMBLES_PER_WORKER = 16


class Slot:
    """One worker's REPL handles."""

    def __init__(self, name: str, *, detached: bool = False) -> None:
        self.name = name
        # A dead worker's late writer (a job that outlived it) gets a detached
        # slot: what it records is thrown away, never kept under a dead name.
        self.detached = detached
        # header import key -> env; the Worker writes it as it loads headers.
        self.headers: dict[str, int] = {}
        # "<import key>\0<preamble key>" -> (env, Lean's messages for the preamble)
        self._preambles: collections.OrderedDict[str, tuple[int, list]] = collections.OrderedDict()
        # Attempts launched here, any job's: a process that ran another job's
        # code may carry what it left behind (pool/runner.py, who is charged).
        self.attempts = 0
        # id(chain) -> chain, for every chain with a realization built here.
        self._chains: weakref.WeakValueDictionary[int, object] = weakref.WeakValueDictionary()

    # -- preambles ---------------------------------------------------------------

    def preamble(self, key: str) -> tuple[int, list] | None:
        found = self._preambles.get(key)
        if found is not None:
            self._preambles.move_to_end(key)
        return found

    def put_preamble(self, key: str, env: int, messages: list) -> None:
        self._preambles[key] = (env, messages)
        while len(self._preambles) > PREAMBLES_PER_WORKER:
            self._preambles.popitem(last=False)

    @property
    def preamble_count(self) -> int:
        return len(self._preambles)

    # -- chain realizations ------------------------------------------------------

    def built(self, chain) -> dict:
        """`chain`'s realizations on this worker (step key -> REPL handle), to read and write."""
        if self.detached:
            return {}
        self._chains[id(chain)] = chain
        return chain.realized.setdefault(self.name, {})

    def chains(self) -> list:
        """The chains with realizations built here (live objects only)."""
        return [chain for chain in self._chains.values() if self.name in chain.realized]

    def drop(self) -> None:
        """Forgets every REPL handle of this worker (its process is gone)."""
        self.headers.clear()
        self._preambles.clear()
        for chain in list(self._chains.values()):
            chain.realized.pop(self.name, None)
        self._chains.clear()


class Slots:
    """The pool's slots, by worker name."""

    def __init__(self, index: PrefixIndex) -> None:
        self.index = index
        self._slots: dict[str, Slot] = {}
        self._dropped: set[str] = set()  # worker names are never reused

    def __contains__(self, name: str) -> bool:
        return name in self._slots

    def __len__(self) -> int:
        return len(self._slots)

    def open(self, name: str) -> Slot:
        """The slot of a new worker (or the one it already has)."""
        slot = self._slots.get(name)
        if slot is None:
            slot = self._slots[name] = Slot(name)
        return slot

    def of(self, name: str) -> Slot:
        """The worker's slot (a detached one once it is dropped); a worker not
        spawned by the pool (tests) gets one on first use."""
        if name in self._dropped:
            return Slot(name, detached=True)
        return self.open(name)

    def drop(self, name: str) -> None:
        """The worker is DEAD: every REPL handle it held goes, with its prefix-index entries."""
        self._dropped.add(name)
        slot = self._slots.pop(name, None)
        if slot is not None:
            slot.drop()
        self.index.forget_worker(name)


class WorkerHandle:
    """What a service's call gets of a worker: requests and a taint mark, not its life.

    `taint` asks the pool to replace the worker after this job (it finishes
    the job, then stops); only the pool kills. Of the slot it gives only
    `built` (a chain's realizations here), not the slot itself.
    """

    __slots__ = ("_worker", "_slot")

    def __init__(self, worker, slot: Slot) -> None:
        self._worker = worker
        self._slot = slot

    @property
    def name(self) -> str:
        return self._worker.name

    @property
    def profile(self) -> str:
        return self._worker.profile

    @property
    def version_string(self) -> str:
        return self._worker.version_string

    @property
    def alive(self) -> bool:
        return self._worker.alive

    @property
    def pid(self) -> int | None:
        """The REPL's process id (the Prover finds its scratch under /proc/<pid>)."""
        return self._worker.pid

    async def request(self, payload: repl.Request, timeout: float) -> repl.Response:
        return await self._worker.request(payload, timeout)

    async def request_batch(
        self, payloads: list, timeout: float, total: float | None = None
    ) -> list:
        """Several requests pipelined, one fence and one audit (Worker.request_batch)."""
        return await self._worker.request_batch(payloads, timeout, total)

    def built(self, chain) -> dict:
        return self._slot.built(chain)

    def taint(self) -> None:
        """No new work for this worker: it stops after the current job."""
        self._worker.drain(ExitCause.POISONED)
