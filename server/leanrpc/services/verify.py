"""Verify: one snippet in, one VerifyResult out, on internal types only.

Lean-level outcomes (errors, sorry) become result statuses; worker failures
become TIMEOUT / CRASH / OUT_OF_MEMORY results; a header that does not load
becomes REJECTED. Only admission problems (bad input, queue full, not
serving) are raised, for the edge to map to gRPC status codes.
"""

from __future__ import annotations

import dataclasses
import re
import time

from ..config import Config
from ..core.headers import split_header
from ..errors import (
    HeaderLoadError,
    RequestError,
    WorkerCrashed,
    WorkerOutOfMemory,
    WorkerTimeout,
)
from ..pool.pool import BodyOutcome, Job, Pool
from ..repl.outcome import (  # noqa: F401  (re-exported until the pool branch imports leanrpc.repl)
    NATIVE_AXIOMS,
    STANDARD_AXIOMS,
    apply_axiom_check as _apply_axiom_check,
    classify,
    message_from_repl,
    sorry_from_repl,
)
from ..results import ReuseInfo, Status, Timings, VerifyResult

INFOTREE_MODES = ("original", "substantive", "tactics", "full")
_DECLARATION = re.compile(
    r"^[ \t]*(?:@\[[^\]]*\][ \t]*)?(?:(?:private|protected|noncomputable|nonrec)[ \t]+)*"
    r"(?P<kind>theorem|lemma)[ \t]+(?P<name>[^\s:({\[]+)",
    re.M,
)
_NAMESPACE = re.compile(r"^[ \t]*(?P<cmd>namespace|end|section)\b[ \t]*(?P<name>[^\s]*)", re.M)


@dataclasses.dataclass
class VerifyOptions:
    timeout_s: float = 0.0  # 0: server default
    infotree: str | None = None
    reuse: bool = True
    check_axioms: bool = False
    session: str = ""


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

    async def verify(self, snippet_id: str, code: str, options: VerifyOptions, *, deadline: float | None = None) -> VerifyResult:
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
        if options.check_axioms:
            names = declared_theorems(split.body)
            if names:
                after_body = "\n".join(f"#print axioms {name}" for name in names)
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


def declared_theorems(body: str) -> list[str]:
    """Fully qualified names of theorems/lemmas declared in `body`.

    Tracks `namespace`/`end`; good enough for `#print axioms` on proof
    snippets (a name we get wrong gives an error message, never a VALID).
    """
    events = [(m.start(), "decl", m.group("name")) for m in _DECLARATION.finditer(body)]
    events += [(m.start(), m.group("cmd"), m.group("name")) for m in _NAMESPACE.finditer(body)]
    events.sort()
    scopes: list[tuple[str, str]] = []
    names: list[str] = []
    for _pos, kind, name in events:
        if kind == "namespace":
            scopes.append(("namespace", name))
        elif kind == "section":
            scopes.append(("section", name))
        elif kind == "end":
            if scopes:
                scopes.pop()
        else:
            prefix = ".".join(n for k, n in scopes if k == "namespace" and n)
            if name.startswith("_root_."):
                full = name[len("_root_."):]
            else:
                full = f"{prefix}.{name}" if prefix else name
            names.append(full)
    return names
