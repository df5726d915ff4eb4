"""Verify: one snippet in, one VerifyResult out, on internal types only.

Lean-level outcomes (errors, sorry) become result statuses; worker failures
become TIMEOUT / CRASH / OUT_OF_MEMORY results; a header that does not load
becomes REJECTED. Only admission problems (bad input, queue full, not
serving) are raised, for the edge to map to gRPC status codes.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time

from ..config import Config
from ..core.declarations import plan_axiom_check
from ..core.headers import split_header
from ..errors import (
    HeaderLoadError,
    RequestError,
    WorkerCrashed,
    WorkerOutOfMemory,
    WorkerTimeout,
)
from ..pool.pool import BodyOutcome, Job, Pool
from ..results import (
    Message,
    Position,
    ReuseInfo,
    Severity,
    SorryInfo,
    Status,
    Timings,
    VerifyResult,
)

INFOTREE_MODES = ("original", "substantive", "tactics", "full")
STANDARD_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
# `native_decide` shows up as these axioms.
NATIVE_AXIOMS = frozenset({"Lean.ofReduceBool", "Lean.trustCompiler"})

# Both spellings: 'sorry' (Lean <= 4.27) and `sorry` (Lean >= 4.28).
_SORRY_WARNING = re.compile(r"declaration uses ['`]sorry['`]")
_AXIOMS_LINE = re.compile(r"'(?P<name>[^']+)' depends on axioms: \[(?P<axioms>[^\]]*)\]", re.S)
_AXIOMS_ANSWER = re.compile(r"'[^']+' (?:depends on axioms: \[|does not depend on any axioms)")


@dataclasses.dataclass
class VerifyOptions:
    timeout_s: float = 0.0  # 0: server default
    infotree: str | None = None
    reuse: bool = True
    check_axioms: bool = False
    session: str = ""
    cache: bool = True  # False: bypass the result cache (leanrpc.cache)


class VerifyService:
    def __init__(self, pool: Pool, config: Config) -> None:
        self.pool = pool
        self.config = config
        from .sessions import SessionService

        self.sessions = SessionService(self)

    def validate(self, code: str, options: VerifyOptions) -> None:
        """Raises RequestError for input the service refuses outright."""
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
        if options.session:
            self.sessions.check_exists(options.session)

    async def verify(self, snippet_id: str, code: str, options: VerifyOptions, *, deadline: float | None = None,
                     client_id: str = "", stream_id: str = "") -> VerifyResult:
        # client_id / stream_id: who the snippet is for (edge: token or peer) and
        # its stream or batch, for fair queuing (issue 15 item 4, pool side).
        arrived = time.monotonic()
        self.validate(code, options)
        if options.session:
            # Runs on the session's env 0 and leaves the session unchanged.
            ran = await self.sessions.run(options.session, code, None, options, deadline=deadline,
                                          record=False, result_id=snippet_id)
            return ran.result
        split = split_header(code)
        timeout = options.timeout_s or self.config.pool.default_timeout_s
        after_body = None
        axiom_check = None
        if options.check_axioms:
            # Every proof-carrying declaration, anonymous ones renamed (core/declarations.py).
            axiom_check = plan_axiom_check(split.body, split.body_start_line, split.body_start_column)
            after_body = axiom_check.print_command
            split = dataclasses.replace(split, body=axiom_check.body)
        job = Job(
            split=split,
            timeout_s=timeout,
            infotree=options.infotree,
            reuse=options.reuse,
            after_body=after_body,
            deadline=deadline,
        )
        try:
            outcome = await self.pool.submit(job)
        except WorkerTimeout as exc:
            return self._failure(snippet_id, Status.TIMEOUT, exc, arrived, job)
        except WorkerOutOfMemory as exc:
            return self._failure(snippet_id, Status.OUT_OF_MEMORY, exc, arrived, job)
        except WorkerCrashed as exc:
            return self._failure(snippet_id, Status.CRASH, exc, arrived, job)
        except HeaderLoadError as exc:
            result = self._failure(snippet_id, Status.REJECTED, exc, arrived, job)
            result.messages = [message_from_repl(m) for m in exc.messages]
            return result
        result = classify(snippet_id, outcome, options.check_axioms)
        if axiom_check is not None:
            _restore_positions(result, axiom_check)
            _require_every_check(result, outcome.after_response, axiom_check.names)
        result.verifier = self.pool.identity
        result.timings.total_s = time.monotonic() - arrived
        return result

    def _failure(self, snippet_id: str, status: Status, exc: Exception, arrived: float, job: Job) -> VerifyResult:
        error = getattr(exc, "message", str(exc))
        tail = getattr(exc, "stderr_tail", "")
        if tail:
            error = f"{error}\n--- REPL stderr (tail) ---\n{tail[-2000:]}"
        return VerifyResult(
            id=snippet_id,
            status=status,
            error=error,
            timings=Timings(total_s=time.monotonic() - arrived),
            reuse=ReuseInfo(attempts=max(1, job.attempts)),
            verifier=self.pool.identity,
        )


def classify(snippet_id: str, outcome: BodyOutcome, check_axioms: bool) -> VerifyResult:
    response = outcome.response
    result = VerifyResult(
        id=snippet_id,
        status=Status.VALID,
        timings=Timings(
            queue_s=outcome.queue_s, header_s=outcome.header_s, body_s=outcome.body_s, boot_s=outcome.boot_s
        ),
        reuse=ReuseInfo(
            warm_header=outcome.warm_header,
            reused_prefix_chars=outcome.reused_prefix_chars,
            worker=outcome.worker,
            attempts=outcome.attempts,
        ),
    )
    if "env" not in response and "message" in response:
        # A request-level REPL error ("Unknown environment.", exceptions).
        result.status = Status.REJECTED
        result.error = f"REPL error: {response['message']}"
        return result
    result.messages = [message_from_repl(m) for m in response.get("messages", [])]
    result.sorries = [sorry_from_repl(s) for s in response.get("sorries", []) if "pos" in s or "goal" in s]
    if "infotree" in response:
        result.infotree_json = json.dumps(response["infotree"], ensure_ascii=False)
    has_error = any(m.severity is Severity.ERROR for m in result.messages)
    has_sorry = bool(result.sorries) or any(
        m.severity is Severity.WARNING and _SORRY_WARNING.search(m.text) for m in result.messages
    )
    if has_error:
        result.status = Status.INVALID
    elif has_sorry:
        result.status = Status.SORRY
    if check_axioms:
        _apply_axiom_check(result, outcome.after_response)
    return result


def _apply_axiom_check(result: VerifyResult, after: dict | None) -> None:
    if after is None:
        return
    used: set[str] = set()
    for message in after.get("messages", []):
        match = _AXIOMS_LINE.search(message.get("data", ""))
        if match:
            used.update(a.strip() for a in match.group("axioms").split(",") if a.strip())
    result.axioms = sorted(used)
    if result.status is not Status.VALID:
        return
    if "sorryAx" in used:
        result.status = Status.SORRY
        return
    native = used & NATIVE_AXIOMS
    extra = used - STANDARD_AXIOMS - NATIVE_AXIOMS
    if native:
        result.status = Status.REJECTED
        result.error = f"proof uses native_decide / compiler trust ({', '.join(sorted(native))})"
    elif extra:
        result.status = Status.REJECTED
        result.error = f"proof uses non-standard axioms: {', '.join(sorted(extra))}"


def _restore_positions(result: VerifyResult, check) -> None:
    """Maps positions in a body renamed for check_axioms back to the user's text."""
    for item in [*result.messages, *result.sorries]:
        for attr in ("start", "end"):
            pos = getattr(item, attr)
            if pos is not None:
                setattr(item, attr, Position(*check.original_position(pos.line, pos.column)))


def _require_every_check(result: VerifyResult, after: dict | None, names: list[str]) -> None:
    """Fail closed: a VALID stands only if `#print axioms` answered for every name."""
    if result.status is not Status.VALID or not names:
        return
    messages = (after or {}).get("messages", [])
    answered = sum(1 for m in messages if _AXIOMS_ANSWER.search(m.get("data", "")))
    errors = [m.get("data", "") for m in messages if m.get("severity") == "error"]
    if after is None or errors or answered < len(names):
        result.status = Status.REJECTED
        detail = "; ".join(errors)[:300] or f"{answered} of {len(names)} answered"
        result.error = f"check_axioms could not check every declaration ({', '.join(names)}): {detail}"


def message_from_repl(raw: dict) -> Message:
    pos = raw.get("pos") or {"line": 0, "column": 0}
    end = raw.get("endPos")
    return Message(
        severity=Severity.from_repl(raw.get("severity", "info")),
        start=Position(int(pos.get("line", 0)), int(pos.get("column", 0))),
        end=Position(int(end.get("line", 0)), int(end.get("column", 0))) if end else None,
        text=str(raw.get("data", "")),
    )


def sorry_from_repl(raw: dict) -> SorryInfo:
    pos = raw.get("pos")
    end = raw.get("endPos")
    return SorryInfo(
        start=Position(pos["line"], pos["column"]) if pos else None,
        end=Position(end["line"], end["column"]) if end else None,
        goal=str(raw.get("goal", "")),
    )
