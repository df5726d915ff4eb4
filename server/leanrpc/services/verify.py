"""Verify: one snippet in, one VerifyResult out, on internal types only.

Owns: input validation, the `check_axioms` follow-up command (on unless the
request turns it off; planned and read by services.axioms), and what the edge may ask of the pool (`admission()`, `info()`), so
the edge never touches the pool. Results are built by services.outcomes
(Lean messages -> statuses, worker failures -> TIMEOUT / CRASH /
OUT_OF_MEMORY, a header that does not load -> REJECTED). Only admission
problems (bad input, queue full, not serving) are raised, for the edge to
map to gRPC status codes. May import: config, core, errors, results, repl, pool,
services.outcomes, services.axioms, services.sessions, services.reference (statements pinned
to a reference), services.judge (the external judge on a pinned VALID).
Never imports edge or `*_pb2`.
"""

from __future__ import annotations

import dataclasses

from ..config import Config
from ..core.headers import split_header
from ..reference import query_command
from ..errors import ConfigError, RequestError
from ..pool import Job, Pool, PoolSnapshot
from ..results import JudgeLevel, ReferenceCheck, ReferenceReason, Status, VerifyResult
from . import axioms
from .outcomes import run_job
from .policy import CodePolicy
from .judge import JudgeService
from .reference import ReferenceService
from .sessions import SessionService

INFOTREE_MODES = ("original", "substantive", "tactics", "full")


@dataclasses.dataclass
class VerifyOptions:
    timeout_s: float = 0.0  # 0: server default
    infotree: str | None = None
    reuse: bool = True
    # None: the server default (`[axioms] check`, on unless configured off);
    # False turns the check off for this request only.
    check_axioms: bool | None = None
    session: str = ""
    # Use the result cache (leanrpc.cache wraps this service); false bypasses it.
    cache: bool = True
    # The REPL profile (`[repl.<name>]`); "" = the default `[repl]`.
    profile: str = ""
    # The problem's own statement (issue 25 item 2): header plus declarations
    # proved by `sorry`; "" = not pinned. services.reference checks it.
    reference: str = ""


class VerifyService:
    """Verify on internal types; also what the edge may ask of the pool."""

    def __init__(self, pool: Pool, config: Config) -> None:
        self.pool = pool
        self.config = config
        self.policy = CodePolicy(config, frozenset(config.axioms.allowed))
        self.sessions = SessionService(pool, config, self.validate, self.policy)
        self.references = ReferenceService(pool, config)
        self.judge = JudgeService(config, getattr(pool, "launcher", None))

    def axioms_on(self, options: VerifyOptions) -> bool:
        """Whether check_axioms runs for `options` (None = `[axioms] check`)."""
        return axioms.axioms_on(options, self.config)

    def admission(self, count: int = 1) -> None:
        """Raises OverloadedError or NotServingError unless `count` more
        snippets may be queued now (the pool's one admission check)."""
        self.pool.check_admission(count)

    def info(self) -> PoolSnapshot:
        """Size, worker states, queue, serving state and verifier identity."""
        return self.pool.snapshot()

    def validate(self, code: str, options: VerifyOptions, *, client_id: str = "") -> None:
        """Raises RequestError for input the service refuses outright; a
        session (`options.session`) must be one `client_id` opened (anyone
        else's is NotFoundError, as an unknown one)."""
        if not code.strip():
            raise RequestError("snippet code is empty")
        if len(code) > self.config.server.max_code_chars:
            raise RequestError(
                f"snippet code has {len(code)} characters, over the limit of {self.config.server.max_code_chars}"
            )
        if options.timeout_s < 0 or options.timeout_s != options.timeout_s:
            raise RequestError("timeout_s must be a non-negative number")
        if options.timeout_s > self.config.pool.max_timeout_s:
            raise RequestError(f"timeout_s {options.timeout_s} is over the limit of {self.config.pool.max_timeout_s}")
        if options.infotree is not None and options.infotree not in INFOTREE_MODES:
            raise RequestError(f"unknown infotree mode {options.infotree!r}")
        if "\x00" in code:
            raise RequestError("snippet code contains a NUL character")
        if options.profile:
            try:
                self.pool.check_profile(options.profile)
            except ConfigError as exc:  # unknown: bad input (INVALID_ARGUMENT) naming the field
                raise RequestError(exc.message, field="options.profile") from exc
        if options.reference:
            if options.session:
                raise RequestError("a reference cannot be pinned in a session", field="reference")
            self.references.parse(options.reference)
        if options.session:
            # The session runs on its own profile; naming another one is refused.
            self.sessions.check_profile(self.sessions.registry.get(options.session, client_id), options.profile)

    async def verify(self, snippet_id: str, code: str, options: VerifyOptions, *, deadline: float | None = None,
                     client_id: str = "", stream_id: str = "", screened: bool = False) -> VerifyResult:
        """One snippet, one result. `client_id` (the authenticated caller) and
        `stream_id` (its stream or batch) decide its turn in the fair queue;
        a session must be one `client_id` opened.
        Under the `proof` code policy, a snippet that would run its own code
        never reaches a REPL (`screened`: the caller already asked `screen`)."""
        self.validate(code, options, client_id=client_id)
        policy = self.policy.of(options.profile, client_id)
        if not screened:
            refused = self.screen(snippet_id, code, options, client_id)
            if refused is not None:
                return refused
        result = await self._verify(snippet_id, code, options, deadline, client_id, stream_id)
        result.policy = policy
        result.axioms_checked = result.axioms_checked or self.axioms_on(options)
        return result

    def screen(self, snippet_id: str, code: str, options: VerifyOptions, client_id: str = "") -> VerifyResult | None:
        """The code policy's answer to a snippet that must not reach a REPL
        (leanrpc.services.policy), or None: run it. The cache asks first too."""
        policy = self.policy.of(options.profile, client_id)
        # A pinned snippet's axioms are checked by the statement check too.
        pinned = bool(options.reference)
        result = self.policy.screen(snippet_id, code, policy, check_axioms=self.axioms_on(options) or pinned)
        if result is not None and pinned and result.axioms_checked:
            # Native evaluation under a reference: what the statement check would say.
            names = self.references.parse(options.reference).names
            result.status = Status.INVALID
            result.reference = ReferenceCheck(passed=False, reason=ReferenceReason.FORBIDDEN_AXIOM,
                                              declaration=names[0] if names else "", detail=result.error,
                                              declarations=names)
        return result

    async def _verify(self, snippet_id: str, code: str, options: VerifyOptions, deadline: float | None,
                      client_id: str, stream_id: str) -> VerifyResult:
        if options.session:
            # Runs on the session's env 0 and leaves the session unchanged.
            ran = await self.sessions.run(options.session, code, None, options, deadline=deadline, record=False,
                                          result_id=snippet_id, client_id=client_id, stream_id=stream_id)
            return ran.result
        split = split_header(code)
        after_body = None
        axiom_check = None
        check_axioms = self.axioms_on(options)
        if check_axioms:
            # Every proof-carrying declaration, anonymous ones renamed (core/declarations.py).
            axiom_check = axioms.plan(split.body, split.body_start_line, split.body_start_column)
            after_body = axiom_check.print_command
            split = dataclasses.replace(split, body=axiom_check.body)
        reference = pinned = None
        cached = False
        timeout_s = options.timeout_s or self.config.pool.default_timeout_s
        if options.reference:
            reference = self.references.parse(options.reference)
            pinned, cached = await self.references.pinned(reference, options.profile, split, timeout_s=timeout_s,
                                                          deadline=deadline, client_id=client_id,
                                                          stream_id=stream_id)
        job = Job(
            split=split,
            timeout_s=timeout_s,
            infotree=options.infotree,
            reuse=options.reuse,
            after_body=after_body,
            reference_query=None if reference is None else query_command(reference.names),
            deadline=deadline,
            client_id=client_id,
            stream_id=stream_id,
            profile=options.profile,
        )
        result, outcome = await run_job(self.pool, job, snippet_id)
        if reference is not None:  # first: its structured reason names the declaration
            self.references.apply(result, outcome, reference, pinned, cached)
        if axiom_check is not None:
            axioms.finish(result, outcome, axiom_check, self.config)
        if reference is not None:
            if result.status is Status.VALID and self.judge.enabled:
                await self._judge(result, options.reference, code)
        return result

    async def _judge(self, result: VerifyResult, reference: str, code: str) -> None:
        """The external judge's word on a pinned VALID: anything but ACCEPTED downgrades it."""
        check = await self.judge.judge(reference, code)
        result.judge = check
        if check.level is JudgeLevel.REFUSED:
            result.status = Status.INVALID
            result.error = f"judge {check.judge} refused: {check.detail[-300:]}"
        elif check.level is not JudgeLevel.ACCEPTED:
            result.status = Status.REJECTED
            result.error = f"judge {check.judge} gave no verdict ({check.level.name}): {check.detail[-300:]}"
