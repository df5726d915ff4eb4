"""Verify: one snippet in, one VerifyResult out, on internal types only.

Owns: running a request the door resolved (services.resolve: validated,
split, timeout and policy applied once there), the `check_axioms` follow-up command (on unless the
request turns it off; planned and read by services.axioms), and what the edge and the
result cache may ask of the pool (`admission()`, `info()`, `identity_of()`, `worker_pid()`,
`add_worker_listener()`), so neither touches the pool. It holds the pool as a `PoolPort`. Results are built by services.outcomes
(Lean messages -> statuses, worker failures -> TIMEOUT / CRASH /
OUT_OF_MEMORY, a header that does not load -> REJECTED). Only admission
problems (bad input, queue full, not serving) are raised, for the edge to
map to gRPC status codes. May import: config, errors, results, repl, pool, services.resolve,
services.outcomes, services.axioms, services.access, services.sessions, services.reference (statements pinned
to a reference), services.judge (the external judge on a pinned VALID).
Never imports edge or `*_pb2`.
"""

from __future__ import annotations

import dataclasses

from ..config import Config
from ..pool import BodyJob, PoolPort, PoolSnapshot
from ..reference import query_command
from ..results import JudgeLevel, Status, VerifierIdentity, VerifyResult
from . import axioms
from .access import ProfileAccess
from .judge import JudgeService
from .outcomes import run_job
from .policy import CodePolicy
from .reference import ReferenceService
from .resolve import INFOTREE_MODES, Resolved, Resolver, VerifyOptions
from .sessions import SessionService

__all__ = ["INFOTREE_MODES", "Resolved", "VerifyOptions", "VerifyService"]


class VerifyService:
    """Verify on internal types; also what the edge may ask of the pool."""

    def __init__(self, pool: PoolPort, config: Config, access: ProfileAccess | None = None) -> None:
        self.pool = pool
        self.config = config
        # ConfigError first: a trusted profile open to all (the app checks it
        # before any worker starts and hands its checked rules in).
        self.access = access if access is not None else ProfileAccess(config)
        self.policy = CodePolicy(config, frozenset(config.axioms.allowed))
        self.sessions = SessionService(pool, config, self.policy)
        self.references = ReferenceService(pool, config)
        self.judge = JudgeService(config, getattr(pool, "launcher", None))
        # The one resolver (services.resolve); the cache adds its keys (CachedVerifier).
        self.resolver = Resolver(
            config,
            self.policy,
            lambda profile: self.pool.check_profile(profile),
            self.references.parse,
            self.access,
            self.sessions,
        )

    def admission(self, count: int = 1) -> None:
        """Raises OverloadedError or NotServingError unless `count` more
        snippets may be queued now (the pool's one admission check)."""
        self.pool.check_admission(count)

    def info(self) -> PoolSnapshot:
        """Size, worker states, queue, serving state and verifier identity."""
        return self.pool.snapshot()

    def identity_of(self, profile: str = "") -> VerifierIdentity | None:
        """The verifier identity of a REPL profile, None until one of its workers booted."""
        return self.pool.identity_of(profile)

    def worker_pid(self, name: str) -> int:
        """The process id of worker `name`, 0 when it is gone."""
        return self.pool.worker_pid(name)

    def add_worker_listener(self, listener) -> None:
        """`listener(info, old, new)` on every worker transition (a pool.WorkerInfo: name, pid, exit cause)."""
        self.pool.add_state_listener(listener)

    async def close(self) -> None:
        """Nothing to flush (the cache wrapper flushes its writes)."""

    def resolve(
        self,
        snippet_id: str,
        code: str,
        options: VerifyOptions,
        *,
        client_id: str = "",
        stream_id: str = "",
        deadline: float | None = None,
    ) -> Resolved:
        """The request resolved (services.resolve); RequestError for refused input."""
        return self.resolver.resolve(
            snippet_id, code, options, client_id=client_id, stream_id=stream_id, deadline=deadline
        )

    async def verify(
        self,
        snippet_id: str,
        code: str,
        options: VerifyOptions,
        *,
        deadline: float | None = None,
        client_id: str = "",
        stream_id: str = "",
    ) -> VerifyResult:
        """Resolve and run, for in-process callers (a door resolves first, then `run`s)."""
        return await self.run(
            self.resolve(
                snippet_id,
                code,
                options,
                client_id=client_id,
                stream_id=stream_id,
                deadline=deadline,
            )
        )

    async def run(self, request: Resolved) -> VerifyResult:
        """One resolved snippet, one result. `client_id` (the authenticated
        caller) and `stream_id` (its stream or batch) decide its turn in the
        fair queue. Under the `proof` code policy, a snippet that would run
        its own code never reaches a REPL (`request.refused` is its answer)."""
        refused = request.answer()
        if refused is not None:
            return refused
        result = await self._verify(request)
        result.policy = request.policy
        result.axioms_checked = result.axioms_checked or request.check_axioms
        return result

    async def _verify(self, request: Resolved) -> VerifyResult:
        if request.options.session:
            # Runs on the session's env 0 and leaves the session unchanged.
            ran = await self.sessions.run(request.options.session, request, None, record=False)
            return ran.result
        split = request.split
        after_body = None
        axiom_check = None
        reference = request.reference
        # A name the statement query asks `#print axioms` about is not asked twice.
        reference_names = () if reference is None else reference.names
        if request.check_axioms:
            # Every proof-carrying declaration, anonymous ones renamed (core/declarations.py).
            try:
                axiom_check = axioms.plan(
                    split.body, split.body_start_line, split.body_start_column
                )
            except axioms.Unreadable as error:  # fail closed, before any REPL sees it
                return VerifyResult(
                    id=request.snippet_id, status=Status.REJECTED, error=error.message
                )
            after_body = axioms.after_command(axiom_check, reference_names)
            split = dataclasses.replace(split, body=axiom_check.body)
        pinned = None
        cached = False
        if reference is not None:
            pinned, cached = await self.references.pinned(
                reference,
                request.profile,
                split,
                timeout_s=request.timeout_s,
                deadline=request.deadline,
                client_id=request.client_id,
                stream_id=request.stream_id,
            )
        job = BodyJob(
            split=split,
            timeout_s=request.timeout_s,
            infotree=request.options.infotree,
            all_tactics=request.options.all_tactics,
            root_goals=request.options.root_goals,
            declarations=request.options.declarations,
            reuse=request.options.reuse,
            after_body=after_body,
            reference_query=None if reference is None else query_command(reference.names),
            deadline=request.deadline,
            client_id=request.client_id,
            stream_id=request.stream_id,
            profile=request.profile,
            retire_worker=request.retire_worker,
            avoid_worker=request.avoid_worker,
        )
        result, outcome = await run_job(self.pool, job, request.snippet_id)
        if reference is not None:  # first: its structured reason names the declaration
            self.references.apply(result, outcome, reference, pinned, cached, split.modules)
        if axiom_check is not None:
            axioms.finish(result, outcome, axiom_check, self.config, reference_names)
        if reference is not None:
            if result.status is Status.VALID and self.judge.enabled:
                await self._judge(result, request.options.reference, request.code, reference)
        return result

    async def _judge(self, result: VerifyResult, reference: str, code: str, parsed) -> None:
        """The external judge's word on a pinned VALID: anything but ACCEPTED downgrades it."""
        theorems = [d.name for d in parsed.decls if d.printed_kind == "theorem"]
        holes = [d.name for d in parsed.decls if d.printed_kind == "def" and d.body_is_sorry]
        check = await self.judge.judge(reference, code, theorems, holes)
        result.judge = check
        if check.level is JudgeLevel.REFUSED:
            result.status = Status.INVALID
            result.error = f"judge {check.judge} refused: {check.detail[-300:]}"
        elif check.level is not JudgeLevel.ACCEPTED:
            result.status = Status.REJECTED
            result.error = (
                f"judge {check.judge} gave no verdict ({check.level.name}): {check.detail[-300:]}"
            )
