"""The Prover service on internal types: start a proof, run tactics, release states.

Owns: the expansion as pool jobs (one batch of tactics per job, a timed-out
tactic's neighbours run again in the next round), the quotas at run time, and
the service's limits. Input is resolved once at the door by the doors' one
resolver (services.resolve `Resolver.start` / `expand`, through this
service's `ProverRules`: `prepare`, `state`, `limits`): the service runs an
immutable `ResolvedStart` / `ResolvedExpand` and re-checks nothing. A REPL answer becomes a `TacticOutcome` in
services.prover.outcomes; when tactic mode closes the last goal,
services.prover.whole checks the assembled proof as a normal snippet (only
VALID makes the expansion COMPLETED). May import: config, core, errors, results,
repl, pool, worker (states), services.ports (the Verifier it checks whole proofs
with), services.resolve, services.requests (the resolved requests), services.prover.*. Never
imports edge or `*_pb2`.

Worker failures during an expansion (timeout, crash, memory) are results
with status REJECTED and the reason; the state stays valid (it is rebuilt on
another worker next time). Only bad input and admission problems raise.
"""

from __future__ import annotations

import asyncio
import time

import msgspec

from ...config import Config, ProverConfig
from ...errors import HeaderLoadError, RequestError, WorkerError, WorkerTimeout
from ...pool import PoolPort
from ...repl import message_from_repl
from ...worker.worker import WorkerState
from ..ports import Verifier
from ..requests import ResolvedExpand, ResolvedStart
from . import whole
from .answers import proof_sorries
from .assemble import prepare_code
from .calls import StartCall, TacticCall, TacticRun, job_of
from .moves import StateMover
from .outcomes import ProofStatus, StartedProof, TacticOutcome, failed, read_run
from .pickles import Scratch, can_pickle
from .proofs import ProofState
from .rebuild import Rebuilder
from .registry import StateRegistry, proof_bytes, tactic_bytes

__all__ = ["ProofStatus", "ProverLimits", "ProverService", "StartedProof", "TacticOutcome"]


class ProverLimits(ProverConfig):
    """Server-side bounds: the `[prover]` section's own schema (config/sections.py
    ProverConfig, one source: same keys, defaults and bounds); `from_config`
    adds the cross-key check (docs/PROVER.md)."""

    @classmethod
    def from_config(cls, config: Config) -> "ProverLimits":
        section = config.prover
        if section.default_ttl_s > section.max_ttl_s:
            raise RequestError(
                f"prover.default_ttl_s {section.default_ttl_s} is over prover.max_ttl_s {section.max_ttl_s}"
            )
        return cls(**msgspec.structs.asdict(section))


class ProverService:
    def __init__(
        self, pool: PoolPort, config: Config, verify: Verifier, limits: ProverLimits | None = None
    ) -> None:
        self.pool = pool
        self.config = config
        self.verify = verify
        self.limits = limits or ProverLimits.from_config(config)
        self.registry = StateRegistry(
            max_states_per_client=self.limits.max_states_per_client,
            default_ttl_s=self.limits.default_ttl_s,
            max_ttl_s=self.limits.max_ttl_s,
            max_pickle_bytes=self.limits.max_pickle_store_mb * 2**20,
            max_bytes_per_client=self.limits.max_mb_per_client * 2**20,
            max_bytes_total=self.limits.max_mb_total * 2**20,
        )
        # Under the unshare sandbox each worker's scratch is its own tmpfs at this path.
        self.scratch = Scratch(getattr(pool.launcher, "scratch_dir", None))
        self.rebuilder = Rebuilder(self.registry, self.scratch, pool.cost, self.can_pickle)
        self.mover = StateMover(
            pool,
            self.registry,
            self.rebuilder,
            max_states=self.limits.max_moved_states,
            timeout_s=self.limits.move_timeout_s,
            max_pickle_bytes=self.limits.max_pickle_mb * 2**20,
        )
        pool.add_state_listener(self._on_worker_state)
        pool.add_recycle_hook(self.mover.before_recycle)

    def _on_worker_state(self, worker, old: WorkerState, new: WorkerState) -> None:
        # Its proof state numbers go with its pool slot (pool/slot.py); its scratch files here.
        if new in (WorkerState.DEAD, WorkerState.FAILED):
            self.scratch.forget(worker.name)

    def can_pickle(self, worker) -> bool:
        """Whether `worker`'s REPL pickles proof states (`[prover] pickle`, else
        the Lean version its profile's identity probe learnt)."""
        identity = self.pool.identity_of(getattr(worker, "profile", ""))
        version = identity.lean_version if identity is not None else worker.version_string
        return can_pickle(self.limits.pickle, version)

    async def close(self) -> None:
        await self.mover.close()
        self.scratch.close()

    # -- the door's rules (services.resolve: `ProverRules`) -----------------------

    def prepare(self, code: str, body: str) -> str:
        return prepare_code(code, body)

    def state(self, state_id: str, client_id: str) -> ProofState:
        return self.registry.get(state_id, client_id)

    def resolve_start(self, code: str, **options) -> ResolvedStart:
        """A StartProof resolved by the doors' one resolver (services.resolve):
        `timeout_s`, `ttl_s`, `check_axioms`, `caller`. Doors call it once."""
        return self.verify.resolver.start(self, code, **options)

    def resolve_expand(self, state_id: str, tactics, **options) -> ResolvedExpand:
        """A RunTactic or Expand resolved by the doors' one resolver: `each`,
        `timeout_s`, `caller`, `request_id`, `check_whole`. Doors call it once."""
        return self.verify.resolver.expand(self, state_id, tuple(tactics), **options)

    # -- StartProof --------------------------------------------------------------

    async def start_proof(self, start: ResolvedStart) -> StartedProof:
        arrived = time.monotonic()
        split, code, client_id = start.split, start.code, start.caller.client_id
        self.registry.check_room(client_id, 1, proof_bytes(split.padded_body, code))
        proof = self.registry.new_proof(
            split, split.padded_body, client_id, start.check_axioms, roots=0, code=code
        )
        try:
            response = await self._start(proof, start)
        except BaseException:
            self.registry.forget_proof(proof)  # no state of it was handed out
            raise
        messages = [message_from_repl(m) for m in response.messages]
        roots = [(k, s) for k, s in enumerate(proof_sorries(response)) if s.proof_state is not None]
        states = []
        for index, sorry in roots:
            begin = (sorry.pos.line, sorry.pos.column) if sorry.pos is not None else None
            end = (sorry.end_pos.line, sorry.end_pos.column) if sorry.end_pos is not None else None
            goals = [sorry.goal] if sorry.goal else []
            states.append(
                self.registry.add(
                    proof,
                    (index,),
                    goals,
                    "Incomplete: open goals remain",
                    start.ttl_s,
                    start=begin,
                    end=end,
                )
            )
        proof.spans = {s.path[0]: (s.start, s.end) for s in states}
        return StartedProof(
            proof.proof_id, states, messages, self.pool.identity, time.monotonic() - arrived
        )

    async def _start(self, proof, start: ResolvedStart):
        """The REPL's answer to the proof's command, refused unless it gives proof states."""
        response = (
            await self.pool.submit(job_of(StartCall(proof), start.timeout_s, start.caller))
        ).value
        if response.env is None:
            raise RequestError(f"the REPL refused the code: {response.message}")
        if not any(s.proof_state is not None for s in proof_sorries(response)):
            errors = "; ".join(m.data for m in response.errors)
            raise RequestError(
                "the code gave no proof state (no `sorry` Lean could elaborate)"
                + (f"; Lean says: {errors}" if errors else "")
            )
        self.registry.check_room(
            start.caller.client_id, sum(s.proof_state is not None for s in proof_sorries(response))
        )
        return response

    # -- RunTactic, Expand ------------------------------------------------------

    async def expand(self, request: ResolvedExpand) -> list:
        """The resolved request's tactics on its state, pipelined on one worker
        (one batch, one fence). Per tactic, in order: its `TacticOutcome`, or
        the `RequestError` that refused it at the door (the others still run).
        Raises only for the quota (checked here: it changes as states come and go)."""
        arrived = time.monotonic()
        results: list = list(request.refusals)
        good = request.runnable
        if good:
            size = sum(tactic_bytes(request.tactics[k]) for k in good)
            self.registry.check_room(request.caller.client_id, len(good), size)
            outs = await _Expansion(self, request, good, arrived).run()
            for k, out in zip(good, outs):
                results[k] = out
        return results

    async def run_tactic(self, request: ResolvedExpand) -> TacticOutcome:
        """One tactic (a request resolved without `each`): its outcome."""
        (out,) = await self.expand(request)
        return out

    # -- ReleaseStates -----------------------------------------------------------

    def release(self, state_ids, proof_ids=(), *, client_id: str = "") -> tuple[int, list[str]]:
        """Frees `client_id`'s states and proofs; anyone else's ids are `unknown`."""
        return self.registry.release(list(state_ids), list(proof_ids), client_id=client_id)


class _Expansion:
    """One resolved expansion run as pool jobs: a loop, one job per round.

    A batch whose tactic k ran out of time lost every answer (none was
    confirmed by the fence; the worker is killed): k is REJECTED with the
    timeout, the others run again as the next round (the state is rebuilt
    elsewhere). Any other worker failure rejects them all, as for one."""

    def __init__(
        self, service: ProverService, request: ResolvedExpand, good: tuple[int, ...], arrived: float
    ) -> None:
        self.service, self.request, self.arrived = service, request, arrived
        self.tactics = [request.tactics[k] for k in good]

    def _failed(self, tactic: str, exc: Exception) -> TacticOutcome:
        return failed(self.request.state, tactic, exc, self.request.request_id, self.arrived)

    async def run(self) -> list[TacticOutcome]:
        """One outcome per tactic, in order."""
        outs: list = [None] * len(self.tactics)
        pending = list(range(len(self.tactics)))  # indices into self.tactics still to run
        while pending:
            try:
                runs: list[TacticRun] = await self._submit([self.tactics[k] for k in pending])
            except WorkerTimeout as exc:
                at = exc.batch_index
                if len(pending) == 1 or at is None or at >= len(pending):
                    for k in pending:
                        outs[k] = self._failed(self.tactics[k], exc)
                    return outs
                k = pending.pop(at)
                outs[k] = self._failed(self.tactics[k], exc)
                continue
            except (WorkerError, HeaderLoadError) as exc:
                for k in pending:
                    outs[k] = self._failed(self.tactics[k], exc)
                return outs
            await self._read(runs, pending, outs)
            return outs
        return outs  # (no tactic to run: the service never builds such an expansion)

    async def _read(self, runs: list[TacticRun], pending: list[int], outs: list) -> None:
        """The answers of the round that ran, into `outs`; closed goals checked whole."""
        request, service = self.request, self.service
        read, checks = [], []
        for k, run in zip(pending, runs):
            out, closed = read_run(
                service.registry, request.state, self.tactics[k], run, request.request_id
            )
            outs[k] = out
            read.append(out)
            if closed is not None:
                if request.check_whole:
                    checks.append(whole.check_whole(service.verify, out, closed, request.caller))
                else:
                    out.status = ProofStatus.COMPLETED
        if checks:
            await asyncio.gather(*checks)
        elapsed = time.monotonic() - self.arrived
        for out in read:
            out.elapsed_s = elapsed

    async def _submit(self, tactics: list[str]) -> list[TacticRun]:
        """One round: the tactics still to run, as one pool job."""
        request, service = self.request, self.service
        state, caller = request.state, request.caller
        call = TacticCall(
            state.proof, state.path, tuple(tactics), service.rebuilder, caller.deadline
        )
        job = job_of(call, request.timeout_s, caller)
        # A caller cancelled (a search that found its proof and closed its
        # Expand stream) takes a queued expansion out of the queue but lets a
        # running one finish: cancelling a REPL mid-request kills the worker and
        # every state it holds, which costs far more than one tactic (bounded
        # by its timeout) whose answer nobody reads.
        return (await service.pool.submit(job, finish_if_running=True)).value
