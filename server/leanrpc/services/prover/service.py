"""The Prover service on internal types: start a proof, run tactics, release states.

Owns: input checks (INVALID_ARGUMENT / NOT_FOUND reasons), the expansion as
pool jobs (one batch of tactics per job, a timed-out tactic's neighbours run
again), and the service's limits. A REPL answer becomes a `TacticOutcome` in
services.prover.outcomes; when tactic mode closes the last goal,
services.prover.whole checks the assembled proof as a normal snippet (only
VALID makes the expansion COMPLETED). May import: config, core, errors, results,
repl, pool, worker (states), services.ports (the Verifier it checks whole proofs
with), services.resolve (its rules for code and timeouts), services.prover.*. Never
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
from ...pool import CallJob, PoolPort
from ...repl import message_from_repl
from ...worker.worker import WorkerState
from ..ports import Verifier
from ..resolve import split_text
from . import whole
from .answers import proof_sorries
from .assemble import prepare_code
from .calls import StartCall, TacticCall, TacticRun
from .moves import StateMover
from .outcomes import ProofStatus, StartedProof, TacticOutcome, failed, read_run
from .pickles import Scratch, can_pickle
from .rebuild import Rebuilder
from .registry import ProofState, StateRegistry, proof_bytes, tactic_bytes

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

    # -- checks ------------------------------------------------------------------

    def _timeout(self, timeout_s: float) -> float:
        """`timeout` (a Duration on the wire, seconds here), resolved by the
        doors' one resolver (services.resolve); refusals name the proto field."""
        return self.verify.resolver.timeout(timeout_s, field="timeout")

    def _check_code(self, code: str) -> None:
        self.verify.resolver.check_code(code, "code")
        self._check_policy(code, "code")

    def check_tactic(self, tactic: str) -> None:
        if not tactic.strip():
            raise RequestError("tactic is empty")
        if len(tactic) > self.limits.max_tactic_chars:
            raise RequestError(
                f"tactic has {len(tactic)} characters, over the limit of {self.limits.max_tactic_chars}"
            )
        if "\x00" in tactic:
            raise RequestError("tactic contains a NUL character")
        self._check_policy(tactic, "tactic")

    def _check_policy(self, text: str, what: str) -> None:
        """The Prover runs under the server's default code policy (`[policy]
        default`): under `proof`, code or a tactic that would run its own code
        is refused (PolicyRefused, INVALID_ARGUMENT) before a REPL sees it."""
        policy = self.verify.resolver.policy
        policy.check_command(text, what, policy.of())

    # -- StartProof --------------------------------------------------------------

    async def start_proof(
        self,
        code: str,
        *,
        timeout_s: float = 0.0,
        ttl_s: float = 0.0,
        check_axioms: bool | None = None,
        client_id: str = "",
        deadline: float | None = None,
    ) -> StartedProof:
        arrived = time.monotonic()
        self._check_code(code)
        timeout = self._timeout(timeout_s)
        if ttl_s < 0 or ttl_s != ttl_s or ttl_s > self.limits.max_ttl_s:
            raise RequestError(
                f"ttl {ttl_s:g} s is out of range: between 0 (unset: the server default "
                f"{self.limits.default_ttl_s:g} s) and {self.limits.max_ttl_s:g} s (prover.max_ttl_s)",
                field="ttl",
            )
        split = split_text(code)
        prepared = prepare_code(code, split.body)
        if prepared != code:  # a bare statement, closed with `:= by sorry`
            code, split = prepared, split_text(prepared)
        self.registry.check_room(client_id, 1, proof_bytes(split.padded_body, code))
        proof = self.registry.new_proof(
            split, split.padded_body, client_id, check_axioms, roots=0, code=code
        )
        try:
            response = await self._start(proof, split, timeout, deadline, client_id)
        except BaseException:
            self.registry.forget_proof(proof)  # no state of it was handed out
            raise
        messages = [message_from_repl(m) for m in response.messages]
        roots = [(k, s) for k, s in enumerate(proof_sorries(response)) if s.proof_state is not None]
        states = []
        for index, sorry in roots:
            start = (sorry.pos.line, sorry.pos.column) if sorry.pos is not None else None
            end = (sorry.end_pos.line, sorry.end_pos.column) if sorry.end_pos is not None else None
            goals = [sorry.goal] if sorry.goal else []
            states.append(
                self.registry.add(
                    proof,
                    (index,),
                    goals,
                    "Incomplete: open goals remain",
                    ttl_s,
                    start=start,
                    end=end,
                )
            )
        proof.spans = {s.path[0]: (s.start, s.end) for s in states}
        return StartedProof(
            proof.proof_id, states, messages, self.pool.identity, time.monotonic() - arrived
        )

    async def _start(self, proof, split, timeout: float, deadline: float | None, client_id: str):
        """The REPL's answer to the proof's command, refused unless it gives proof states."""
        job = CallJob(
            split=split,
            timeout_s=timeout,
            deadline=deadline,
            client_id=client_id,
            stream_id=f"prover:{proof.proof_id}",
            call=StartCall(proof),
        )
        response = (await self.pool.submit(job)).value
        if response.env is None:
            raise RequestError(f"the REPL refused the code: {response.message}")
        if not any(s.proof_state is not None for s in proof_sorries(response)):
            errors = "; ".join(m.data for m in response.errors)
            raise RequestError(
                "the code gave no proof state (no `sorry` Lean could elaborate)"
                + (f"; Lean says: {errors}" if errors else "")
            )
        self.registry.check_room(
            client_id, sum(s.proof_state is not None for s in proof_sorries(response))
        )
        return response

    # -- RunTactic, Expand ------------------------------------------------------

    async def run_tactic(
        self,
        state_id: str,
        tactic: str,
        *,
        timeout_s: float = 0.0,
        client_id: str = "",
        deadline: float | None = None,
        request_id: str = "",
        check_whole: bool = True,
    ) -> TacticOutcome:
        """One tactic on one state. `check_whole=False` (Extract's replay check)
        reports closed goals as COMPLETED without the whole-proof
        verification: only for callers that never hand the result out as a proof."""
        arrived = time.monotonic()
        self.check_tactic(tactic)
        timeout = self._timeout(timeout_s)
        state = self.registry.get(state_id, client_id)  # another client's: NOT_FOUND
        self.registry.check_room(client_id, 1, tactic_bytes(tactic))
        (out,) = await self._expand(
            state, [tactic], timeout, deadline, client_id, request_id, check_whole, arrived
        )
        return out

    async def run_tactics(
        self,
        state_id: str,
        tactics: list[str],
        *,
        timeout_s: float = 0.0,
        client_id: str = "",
        deadline: float | None = None,
        request_id: str = "",
    ) -> list:
        """Several tactics on one state, pipelined on one worker (one batch, one
        fence). Per tactic, in order: its `TacticOutcome`, or the `RequestError`
        that refused it (empty, too long, the code policy: checked before any
        REPL sees any of them; the others still run). Raises for what concerns
        them all: no tactics or too many, a bad timeout, an unknown state, quota."""
        arrived = time.monotonic()
        if not tactics:
            raise RequestError("an Expand request needs a tactic or tactics", field="tactics")
        if len(tactics) > self.limits.max_tactics_per_expand:
            raise RequestError(
                f"{len(tactics)} tactics in one request, over the limit of "
                f"{self.limits.max_tactics_per_expand} "
                "(prover.max_tactics_per_expand)",
                field="tactics",
            )
        timeout = self._timeout(timeout_s)
        state = self.registry.get(state_id, client_id)
        results: list = [None] * len(tactics)
        good: list[int] = []
        for k, tactic in enumerate(tactics):
            try:
                self.check_tactic(tactic)
            except RequestError as exc:
                results[k] = exc
            else:
                good.append(k)
        if good:
            size = sum(tactic_bytes(tactics[k]) for k in good)
            self.registry.check_room(client_id, len(good), size)
            outs = await self._expand(
                state,
                [tactics[k] for k in good],
                timeout,
                deadline,
                client_id,
                request_id,
                True,
                arrived,
            )
            for k, out in zip(good, outs):
                results[k] = out
        return results

    async def _expand(
        self,
        state: ProofState,
        tactics: list[str],
        timeout: float,
        deadline: float | None,
        client_id: str,
        request_id: str,
        check_whole: bool,
        arrived: float,
    ) -> list[TacticOutcome]:
        """Runs checked tactics on `state` as one pool job; one outcome each, in order.

        A batch whose tactic k ran out of time lost every answer (none was
        confirmed by the fence; the worker is killed): k is REJECTED with the
        timeout, the others run again as a new job (the state is rebuilt
        elsewhere). Any other worker failure rejects them all, as for one."""
        proof = state.proof
        job = CallJob(
            split=proof.split,
            timeout_s=timeout,
            deadline=deadline,
            client_id=client_id,
            stream_id=f"prover:{proof.proof_id}",
            call=TacticCall(proof, state.path, tuple(tactics), self.rebuilder, deadline),
        )
        try:
            # A caller cancelled (a search that found its proof and closed its
            # Expand stream) takes a queued expansion out of the queue but lets
            # a running one finish: cancelling a REPL mid-request kills the
            # worker and every state it holds, which costs far more than one
            # tactic (bounded by its timeout) whose answer nobody reads.
            outcome = await self.pool.submit(job, finish_if_running=True)
            runs: list[TacticRun] = outcome.value
        except WorkerTimeout as exc:
            at = exc.batch_index
            if len(tactics) == 1 or at is None or at >= len(tactics):
                return [failed(state, t, exc, request_id, arrived) for t in tactics]
            timed_out = failed(state, tactics[at], exc, request_id, arrived)
            rest = await self._expand(
                state,
                tactics[:at] + tactics[at + 1 :],
                timeout,
                deadline,
                client_id,
                request_id,
                check_whole,
                arrived,
            )
            return rest[:at] + [timed_out] + rest[at:]
        except (WorkerError, HeaderLoadError) as exc:
            return [failed(state, t, exc, request_id, arrived) for t in tactics]
        outs, checks = [], []
        for tactic, run in zip(tactics, runs):
            out, closed = read_run(self.registry, state, tactic, run, request_id)
            outs.append(out)
            if closed is not None:
                if check_whole:
                    checks.append(whole.check_whole(self.verify, out, closed, deadline))
                else:
                    out.status = ProofStatus.COMPLETED
        if checks:
            await asyncio.gather(*checks)
        elapsed = time.monotonic() - arrived
        for out in outs:
            out.elapsed_s = elapsed
        return outs

    # -- ReleaseStates -----------------------------------------------------------

    def release(self, state_ids, proof_ids=(), *, client_id: str = "") -> tuple[int, list[str]]:
        """Frees `client_id`'s states and proofs; anyone else's ids are `unknown`."""
        return self.registry.release(list(state_ids), list(proof_ids), client_id=client_id)
