"""Prover calls for the Python client: tactic-level proof states (docs/PROVER.md).

    async with AsyncClient(addr) as client:
        proof = await client.start_proof("theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q")
        step = await client.run_tactic(proof.states[0].state_id, "constructor")
        print(step.status, step.goals)          # "INCOMPLETE", ["case left ...", "case right ..."]

        async for step in client.expand([(state_id, "simp"), (state_id, "omega")]):
            ...                                  # one request: both tactics pipelined on one worker

        found = await best_first_search(client, "theorem ...", lambda goals: ["simp", "omega"])

`ProverCalls` is mixed into `AsyncClient` (aio), `SyncProverCalls` into
`Client` (sync). May import: _proto, _convert, _retry, _streams, grpc.
Times are float seconds here (`timeout_s`, `ttl_s`, `elapsed_s`) and
google.protobuf.Duration on the wire; this module converts both ways
(0 means unset: the server default).
A result is COMPLETED only when the assembled whole proof verified VALID
(`proof_text`, `verification`); REFUTED means tactic mode closed the goals
but the whole proof did not check, and must never be taken as a proof.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import itertools
from typing import AsyncIterator, Callable, Iterable

import grpc

from ._convert import duration, seconds
from ._proto import ppb, ppb_grpc
from ._retry import WRITE_RACE_TEXT, stream_code
from ._streams import broken, settle

__all__ = [
    "ProofStart",
    "ProofState",
    "ProverCalls",
    "SearchResult",
    "SyncProverCalls",
    "TacticResult",
    "best_first_search",
]

_PROOF_STATUS = {v: k.removeprefix("PROOF_STATUS_") for k, v in ppb.ProofStatus.items()}


@dataclasses.dataclass
class ProofState:
    state_id: str
    goals: list[str]
    start: tuple[int, int] | None = None
    end: tuple[int, int] | None = None


@dataclasses.dataclass
class ProofStart:
    proof_id: str
    states: list[ProofState]
    messages: list[str]
    verifier: str
    elapsed_s: float


@dataclasses.dataclass
class TacticResult:
    parent_state_id: str
    tactic: str
    status: str  # COMPLETED, INCOMPLETE, ERROR, REFUTED, REJECTED
    state_id: str
    goals: list[str]
    messages: list[str]
    error: str
    repl_status: str
    elapsed_s: float
    proof_text: str = ""
    verification_status: str = ""  # the whole-proof verdict (VALID, INVALID, ...) when checked
    rebuilt: bool = False
    worker: str = ""
    request_id: str = ""
    # Its position among its request's `tactics` (0 for a request with one tactic).
    index: int = 0
    # States for the sorries the tactic itself opened (one per sorry, each expands on its own).
    opened: list[ProofState] = dataclasses.field(default_factory=list)

    @property
    def completed(self) -> bool:
        return self.status == "COMPLETED"


def tactic_result_from_pb(r: ppb.TacticResult) -> TacticResult:
    from ._convert import _STATUS_NAMES  # the Verifier's status names, for the whole-proof verdict

    return TacticResult(
        parent_state_id=r.parent_state_id,
        tactic=r.tactic,
        status=_PROOF_STATUS.get(r.status, str(r.status)),
        state_id=r.state_id,
        goals=list(r.goals),
        messages=[m.text for m in r.messages],
        error=r.error,
        repl_status=r.repl_status,
        elapsed_s=seconds(r.elapsed),
        proof_text=r.proof_text,
        verification_status=_STATUS_NAMES.get(r.verification.status, "")
        if r.HasField("verification")
        else "",
        rebuilt=r.rebuilt,
        worker=r.worker,
        request_id=r.request_id,
        index=r.index,
        opened=[_state_from_pb(s) for s in r.opened],
    )


def _state_from_pb(s) -> ProofState:
    return ProofState(
        s.state_id,
        list(s.goals),
        (s.start.line, s.start.column) if s.HasField("start") else None,
        (s.end.line, s.end.column) if s.HasField("end") else None,
    )


# What an Expand stream that broke under the client says of the rest.
NEVER_RAN = "the pairs without a result never ran"

# Tactics the client puts in one Expand request (the server's default `[prover]
# max_tactics_per_expand`; a server configured lower answers REJECTED).
MAX_TACTICS_PER_REQUEST = 64


def _runs_by_state(pairs: Iterable[tuple[str, str]], limit: int) -> list[tuple[str, list[str]]]:
    """Consecutive pairs on one state as (state_id, tactics), at most `limit` tactics each."""
    runs: list[tuple[str, list[str]]] = []
    for state_id, tactic in pairs:
        if runs and runs[-1][0] == state_id and len(runs[-1][1]) < limit:
            runs[-1][1].append(tactic)
        else:
            runs.append((state_id, [tactic]))
    return runs


def _duration_or_none(seconds_: float):
    """Float seconds as a request Duration; 0 leaves the field unset (the
    server default). A negative value is sent as is: the server answers
    INVALID_ARGUMENT naming the field."""
    return duration(seconds_) if seconds_ else None


class ProverCalls:
    """StartProof, RunTactic, Expand, ReleaseStates on an AsyncClient's channel."""

    @property
    def _prover_stub(self) -> ppb_grpc.ProverStub:
        stub = self.__dict__.get("_prover_stub_cache")
        if stub is None:
            stub = self.__dict__["_prover_stub_cache"] = ppb_grpc.ProverStub(self._channel)
        return stub

    async def start_proof(
        self,
        code: str,
        *,
        timeout_s: float = 0.0,
        ttl_s: float = 0.0,
        check_axioms: bool | None = None,
        deadline_s: float | None = None,
    ) -> ProofStart:
        """One proof state per `sorry` in `code` (a bare statement gets `:= by sorry`)."""
        request = ppb.StartProofRequest(
            code=code, timeout=_duration_or_none(timeout_s), ttl=_duration_or_none(ttl_s)
        )
        if check_axioms is not None:  # unset = the server's default ([axioms] check, on)
            request.check_axioms = check_axioms
        r = await self._call(self._prover_stub.StartProof, request, deadline_s)
        return ProofStart(
            proof_id=r.proof_id,
            states=[
                ProofState(
                    s.state_id,
                    list(s.goals),
                    (s.start.line, s.start.column) if s.HasField("start") else None,
                    (s.end.line, s.end.column) if s.HasField("end") else None,
                )
                for s in r.states
            ],
            messages=[m.text for m in r.messages],
            verifier=r.verifier.kind,
            elapsed_s=seconds(r.elapsed),
        )

    async def start_proof_at_sorry(
        self, code: str, sorry: dict | tuple[int, int], **kwargs
    ) -> tuple[ProofStart, ProofState]:
        """A proof state for one sorry of a Verify result (LeanInteract's
        `ProofStep` from a sorry): `sorry` is an entry of `Result.sorries` of
        `code` (or its (line, column)). A Verify result's REPL proof state
        lived in a worker the Prover does not own, so the Prover elaborates
        `code` itself (StartProof: states it owns, statements pinned) and the
        state whose sorry starts there is returned, with the whole start
        (its other states are the code's other sorries). ValueError when no
        state of `code` starts at that position. kwargs: as `start_proof`."""
        at = (sorry["line"], sorry["column"]) if isinstance(sorry, dict) else tuple(sorry)
        started = await self.start_proof(code, **kwargs)
        found = next((s for s in started.states if s.start == at), None)
        if found is None:
            await self.release_states(proof_ids=[started.proof_id])
            raise ValueError(f"no sorry of this code starts at line {at[0]}, column {at[1]}")
        return started, found

    async def run_tactic(
        self, state_id: str, tactic: str, *, timeout_s: float = 0.0, deadline_s: float | None = None
    ) -> TacticResult:
        request = ppb.RunTacticRequest(
            state_id=state_id, tactic=tactic, timeout=_duration_or_none(timeout_s)
        )
        return tactic_result_from_pb(
            await self._call(self._prover_stub.RunTactic, request, deadline_s)
        )

    async def expand(
        self,
        pairs: Iterable[tuple[str, str]] | AsyncIterator[tuple[str, str]],
        *,
        timeout_s: float = 0.0,
        batch: bool = True,
        pack: bool = True,
    ) -> AsyncIterator[TacticResult]:
        """(state_id, tactic) pairs over one Expand stream; results as they finish.

        `request_id` of each result is the pair's index (as a string). With
        `batch` (the default) and a list of pairs, consecutive pairs on one
        state go as one request carrying their `tactics` (up to
        `MAX_TACTICS_PER_REQUEST`): the server runs them pipelined on one
        worker, one fence for all, and their results come together, in one
        stream message with `pack` (`pack_results`; one message each without
        it, or from a server that predates it).
        """
        call = self._prover_stub.Expand(metadata=self._metadata)
        timeout = _duration_or_none(timeout_s)
        groups: dict[str, int] = {}  # request_id -> index of its first pair
        all_sent = False  # set before the half-close
        written = results = 0  # pairs whose write returned; results read (one per pair)

        async def send() -> None:
            nonlocal all_sent, written
            index = 0
            if hasattr(pairs, "__aiter__"):
                async for state_id, tactic in pairs:
                    await call.write(
                        ppb.ExpandRequest(
                            request_id=str(index), state_id=state_id, tactic=tactic, timeout=timeout
                        )
                    )
                    index = written = index + 1
            elif not batch:
                for state_id, tactic in pairs:
                    await call.write(
                        ppb.ExpandRequest(
                            request_id=str(index), state_id=state_id, tactic=tactic, timeout=timeout
                        )
                    )
                    index = written = index + 1
            else:
                for state_id, tactics in _runs_by_state(pairs, MAX_TACTICS_PER_REQUEST):
                    request_id = str(index)
                    if len(tactics) == 1:
                        request = ppb.ExpandRequest(
                            request_id=request_id,
                            state_id=state_id,
                            tactic=tactics[0],
                            timeout=timeout,
                        )
                    else:
                        groups[request_id] = index
                        request = ppb.ExpandRequest(
                            request_id=request_id,
                            state_id=state_id,
                            tactics=tactics,
                            timeout=timeout,
                            pack_results=pack,
                        )
                    await call.write(request)
                    index = written = index + len(tactics)
            all_sent = True
            await call.done_writing()

        sender = asyncio.ensure_future(send())
        try:
            try:
                while True:
                    message = await call.read()
                    if message is grpc.aio.EOF:
                        break
                    # A packed answer (pack_results) carries the request's other results in `more`.
                    for part in (message, *message.more):
                        result = tactic_result_from_pb(part)
                        first = groups.get(result.request_id)
                        if first is not None:  # one of a request's tactics: its pair's own index
                            result.request_id = str(first + result.index)
                        results += 1
                        yield result
                if not all_sent:
                    # The server ended the call (shutting down) with pairs left to send;
                    # the sender may wait on `pairs`, which may wait on these results.
                    await settle(sender, cancel=True)
                    raise broken(
                        f"the server ended the Expand stream before every pair was sent; {NEVER_RAN}"
                    )
                if results < written:  # a write won the race with a graceful end: never read
                    raise broken(f"the stream ended with pairs unanswered; {NEVER_RAN}")
                await sender
            except grpc.aio.AioRpcError as exc:
                # grpc's local write race surfaces on the sender or on a read alike.
                if stream_code(exc) is exc.code():
                    raise
                raise broken(f"{WRITE_RACE_TEXT}; {NEVER_RAN}") from exc
        finally:
            sender.cancel()

    async def release_states(
        self, state_ids: Iterable[str] = (), proof_ids: Iterable[str] = ()
    ) -> int:
        request = ppb.ReleaseStatesRequest(state_ids=list(state_ids), proof_ids=list(proof_ids))
        return (await self._call(self._prover_stub.ReleaseStates, request, 30.0)).released


class SyncProverCalls:
    """The blocking Client's prover calls (its private loop thread runs the AsyncClient's)."""

    def start_proof(self, code: str, **kwargs) -> ProofStart:
        return self._run(self._async.start_proof(code, **kwargs))

    def start_proof_at_sorry(
        self, code: str, sorry: dict | tuple[int, int], **kwargs
    ) -> tuple[ProofStart, ProofState]:
        return self._run(self._async.start_proof_at_sorry(code, sorry, **kwargs))

    def run_tactic(self, state_id: str, tactic: str, **kwargs) -> TacticResult:
        return self._run(self._async.run_tactic(state_id, tactic, **kwargs))

    def release_states(self, state_ids: Iterable[str] = (), proof_ids: Iterable[str] = ()) -> int:
        return self._run(self._async.release_states(state_ids, proof_ids))

    def best_first_search(
        self, code: str, tactics: Callable[[list[str]], list[str]], **kwargs
    ) -> "SearchResult":
        return self._run(best_first_search(self._async, code, tactics, **kwargs))


@dataclasses.dataclass
class SearchResult:
    proof_text: str | None  # the whole-proof-verified text, None if not found
    tactics: list[str]  # the path that closed the goal
    expansions: int
    refuted: int  # tactic-mode "Completed" that the whole proof rejected
    elapsed_s: float = 0.0


async def best_first_search(
    client: ProverCalls,
    code: str,
    tactics: Callable[[list[str]], list[str]],
    *,
    max_expansions: int = 256,
    width: int = 32,
    timeout_s: float = 0.0,
    score: Callable[[list[str]], float] | None = None,
) -> SearchResult:
    """Best-first search driving Expand: fewest goals first (or lowest `score(goals)`).

    `tactics(goals)` proposes the tactics to try on a state. Up to `width`
    states are expanded per round, all their tactics over one Expand stream.
    Every state the search made is released at the end.
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    score = score or (lambda goals: float(len(goals)))
    proof = await client.start_proof(code, timeout_s=timeout_s)
    if not proof.states:
        return SearchResult(None, [], 0, 0)
    root = proof.states[0]
    order = itertools.count()
    frontier = [(score(root.goals), next(order), root.state_id, root.goals, [])]
    seen_goals = {tuple(root.goals)}
    expansions = refuted = 0
    try:
        while frontier and expansions < max_expansions:
            batch = [heapq.heappop(frontier) for _ in range(min(width, len(frontier)))]
            pairs, paths = [], []
            for _score, _n, state_id, goals, path in batch:
                for tactic in tactics(goals)[: max(0, max_expansions - expansions - len(pairs))]:
                    pairs.append((state_id, tactic))
                    paths.append(path + [tactic])
            if not pairs:
                break
            expansions += len(pairs)
            async for result in client.expand(pairs, timeout_s=timeout_s):
                path = paths[int(result.request_id)]
                if result.status == "COMPLETED":
                    return SearchResult(
                        result.proof_text, path, expansions, refuted, loop.time() - started
                    )
                if result.status == "REFUTED":
                    refuted += 1
                elif (
                    result.status == "INCOMPLETE"
                    and result.goals
                    and tuple(result.goals) not in seen_goals
                ):
                    seen_goals.add(tuple(result.goals))
                    heapq.heappush(
                        frontier,
                        (score(result.goals), next(order), result.state_id, result.goals, path),
                    )
        return SearchResult(None, [], expansions, refuted, loop.time() - started)
    finally:
        try:
            await client.release_states(proof_ids=[proof.proof_id])
        except Exception:  # noqa: BLE001 - the states expire by TTL anyway
            pass
