"""The Prover's proof model: a proof, its tactic paths, the states handed out.

Owns: `Path` (root sorry index, tactic, tactic, ...), `SorryStep` (a path step
into a sorry the previous tactic opened), `Proof` (one StartProof: its code,
its sorries, which workers elaborated it and which REPL proof state numbers
they hold for which tactic path, the pickles the server holds of it) and
`ProofState` (an immutable node: proof + root sorry + tactic path + goals).
Plain data with the questions asked of it (what a worker holds, what a path
costs, the deepest pickle); who holds which states, quotas and TTL are
services.prover.registry's. May import: core.headers.

A state is named by its *path*, never by a REPL number: REPL numbers die with
their process, paths can be replayed on any worker. `Proof.realized[worker][path]`
is the REPL proof state number of that path on that worker (written through the
worker's slot, pool/slot.py, which drops it at the worker's death), so a lost
worker costs a replay, never a state_id.
"""

from __future__ import annotations

import dataclasses
import time

from ...core.headers import HeaderSplit

__all__ = ["Path", "Proof", "ProofState", "SorryStep"]

# (index of the root sorry, tactic, tactic, ...); a `SorryStep` after a
# tactic goes into one of the sorries that tactic opened.
Path = tuple


class SorryStep(str):
    """A path step into sorry `index` (of `count`) that the previous tactic opened.

    A str (NUL-prefixed, which no tactic may contain) so paths stay plain
    tuples of strings for hashing and cost counting.
    """

    __slots__ = ()

    def __new__(cls, index: int, count: int) -> "SorryStep":
        return super().__new__(cls, f"\x00sorry {index}/{count}")

    @property
    def index(self) -> int:
        return int(self[7:].split("/")[0])

    @property
    def count(self) -> int:
        return int(self.split("/")[1])


class Proof:
    """One StartProof: the command every state of it is rebuilt from."""

    def __init__(
        self,
        proof_id: str,
        split: HeaderSplit,
        command: str,
        client_id: str,
        check_axioms: bool,
        roots: int,
    ) -> None:
        self.proof_id = proof_id
        self.split = split
        self.command = command  # the padded body sent to the REPL (positions = user's text)
        self.client_id = client_id
        self.check_axioms = check_axioms
        self.roots = roots  # number of sorries the command handed out
        self.command_s: float | None = None  # the command's elaboration as measured (StartCall)
        self.code = ""  # the user's code as elaborated (bare statements closed), for assembly
        self.held_bytes = 0  # counted against the client (proof_bytes)
        # root sorry index -> ((line, column), (line, column)) of the sorry in `code`
        self.spans: dict[int, tuple] = {}
        # worker name -> {path -> REPL proof state number on that worker}
        self.realized: dict[str, dict[Path, int]] = {}
        self.live: set[str] = set()  # live state ids of this proof
        # path -> (pickle bytes, goals when pickled): the server's own copy (pickles.py)
        # path after a tactic -> how many sorries that tactic opened (answers.opened_sorries)
        self.opened: dict[Path, int] = {}
        self.pickles: dict[Path, tuple[bytes, list[str]]] = {}

    def held_chars(self, worker: str, path: Path) -> int:
        """Characters of the work to build `path` that `worker` already did."""
        built = self.realized.get(worker)
        if not built:
            return 0
        for k in range(len(path), 0, -1):
            if path[:k] in built:
                return len(self.command) + sum(len(t) + 1 for t in path[1:k])
        return 0

    def cost_chars(self, path: Path) -> int:
        """Characters to elaborate to build `path` on a worker holding none of it."""
        return len(self.command) + sum(len(t) + 1 for t in path[1:])

    def forget_worker(self, worker: str) -> None:
        self.realized.pop(worker, None)

    def deepest_pickle(self, path: Path, above: int = 0) -> int:
        """Length of the longest prefix of `path` with a pickle (0: none over `above`)."""
        return next(
            (
                k
                for k in range(len(path), above, -1)
                if path[:k] in self.pickles
                and not (k < len(path) and isinstance(path[k], SorryStep))
            ),
            0,
        )


@dataclasses.dataclass(eq=False)
class ProofState:
    state_id: str
    proof: Proof
    path: Path
    goals: list[str]
    repl_status: str
    # Where the root sorry is in the user's text ((line, column) pairs), for StartProof.
    start: tuple[int, int] | None = None
    end: tuple[int, int] | None = None
    ttl_s: float = 600.0
    last_used: float = dataclasses.field(default_factory=time.monotonic)
    held_bytes: int = 0  # its tactic and goals, counted against the client

    @property
    def tactics(self) -> tuple[str, ...]:
        return self.path[1:]

    def other_sorries(self) -> int:
        """Sorries of tactics on this path that are not on it (each its own state)."""
        path, opened = self.path, self.proof.opened
        return sum(
            opened[path[:k]] - (k < len(path) and isinstance(path[k], SorryStep))
            for k in range(2, len(path) + 1)
            if path[:k] in opened
        )

    def expired(self, now: float) -> bool:
        return now - self.last_used > self.ttl_s
