"""The reference check of Verify: pinned statements, run on the pool.

Owns: elaborating a reference once per (profile, header, reference) in a
clean env of its own and caching what the REPL says about its declarations
(single flight: concurrent snippets of one problem share one elaboration),
and turning the snippet's answers into `VerifyResult.reference` and its
verdict (leanrpc.reference compares; this room only runs and caches). A
snippet whose env does not hold the reference's statements is INVALID with a
structured reason; a reference that does not elaborate is REJECTED. May
import: config, core, errors, results, repl, reference, policy (a reference is
screened like a snippet), pool, services.outcomes. Never imports edge or `*_pb2`.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses

from .. import repl
from ..config import Config
from ..errors import RequestError
from ..policy import scan
from ..pool import BodyJob, BodyOutcome, PoolPort
from ..reference import DeclAnswer, Reference, compare, parse_reference, query_command, read_answers
from ..reference.answers import reference_problem
from ..results import ReferenceCheck, ReferenceReason, Status, VerifyResult
from .outcomes import run_job

__all__ = ["ReferenceService", "STANDARD_AXIOMS", "screened_reference"]

# The default of `[axioms] allowed`; the check itself reads the configured list.
STANDARD_AXIOMS = repl.STANDARD_AXIOMS
CACHE_ENTRIES = 4096


def screened_reference(text: str, *, max_chars: int = 1_000_000) -> Reference:
    """The parsed reference; RequestError for one that cannot pin anything, or
    that the `proof` code policy refuses. A reference is elaborated on a REPL
    like a snippet, whatever the caller's policy, so it may state declarations
    and never run its own code (a `@[command_elab]` would run on the `#check`
    the statement check sends; native evaluation runs its compiled code)."""
    reference = parse_reference(text, max_chars=max_chars)
    found = scan(text)
    if found.refused:
        raise RequestError(
            f"the reference may only state declarations: {found.message}", field="reference"
        )
    if found.native:
        raise RequestError(
            f"the reference may only state declarations: native evaluation "
            f"({found.native} at line {found.native_line}) runs its own compiled code "
            "inside the REPL",
            field="reference",
        )
    return reference


@dataclasses.dataclass
class Pinned:
    """The reference's own answers (or why it cannot pin anything)."""

    answers: dict[str, DeclAnswer]
    problem: str | None = None
    repl_s: float = 0.0  # REPL seconds of the reference's own elaboration and queries


class ReferenceService:
    """Pins snippets to references; caches each reference's elaborated types."""

    def __init__(self, pool: PoolPort, config: Config) -> None:
        self.pool = pool
        self.config = config
        self._cache: collections.OrderedDict[tuple, Pinned] = collections.OrderedDict()
        self._flights: dict[tuple, asyncio.Future] = {}
        self.elaborations = 0  # how many references were elaborated (not from the cache)
        self.elaboration_s = 0.0  # their REPL seconds, in all

    def forget(self) -> None:
        """Empties the cache of reference answers (benchmarks measure cold references with it)."""
        self._cache.clear()

    def parse(self, text: str) -> Reference:
        """RequestError for a reference that pins nothing or runs code (`screened_reference`)."""
        return screened_reference(text, max_chars=self.config.server.max_code_chars)

    async def pinned(
        self,
        reference: Reference,
        profile: str,
        header_split,
        *,
        timeout_s: float,
        deadline: float | None,
        client_id: str,
        stream_id: str,
    ) -> tuple[Pinned, bool]:
        """The reference's answers, and whether they came from the cache."""
        imports = reference.split.imports or header_split.imports
        key = (profile, imports, reference.text)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit, True
        flight = self._flights.get(key)
        if flight is not None:
            return await asyncio.shield(flight), True
        flight = asyncio.get_running_loop().create_future()
        self._flights[key] = flight
        try:
            pinned = await self._elaborate(
                reference,
                header_split,
                timeout_s=timeout_s,
                deadline=deadline,
                client_id=client_id,
                stream_id=stream_id,
                profile=profile,
            )
        except BaseException as exc:
            flight.set_exception(exc)
            flight.exception()  # retrieved: waiters re-raise it
            raise
        finally:
            self._flights.pop(key, None)
        if not flight.done():
            flight.set_result(pinned)
        if pinned.problem is None or pinned.answers:
            self._cache[key] = pinned
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return pinned, False

    async def _elaborate(
        self,
        reference: Reference,
        header_split,
        *,
        timeout_s,
        deadline,
        client_id,
        stream_id,
        profile,
    ) -> Pinned:
        split = (
            reference.split
            if reference.split.imports or not header_split.imports
            else dataclasses.replace(
                reference.split,
                imports=header_split.imports,
                import_key=header_split.import_key,
                modules=header_split.modules,
            )
        )
        job = BodyJob(
            split=split,
            timeout_s=timeout_s,
            reuse=True,
            reference_query=query_command(reference.names),
            deadline=deadline,
            client_id=client_id,
            stream_id=stream_id,
            profile=profile,
        )
        self.elaborations += 1
        result, outcome = await run_job(self.pool, job, "reference")
        if outcome is None or result.status not in (Status.VALID, Status.SORRY):
            errors = "; ".join(m.text for m in result.messages if m.severity.name == "ERROR")
            return Pinned(
                {},
                f"the reference does not elaborate ({result.status.name}): "
                f"{(errors or result.error)[:300]}",
            )
        answers = answers_of(outcome, reference)
        self.elaboration_s += outcome.body_s + outcome.reference_s
        return Pinned(
            answers, reference_problem(reference, answers), outcome.body_s + outcome.reference_s
        )

    def apply(
        self,
        result: VerifyResult,
        outcome: BodyOutcome | None,
        reference: Reference,
        pinned: Pinned,
        cached: bool,
        modules: tuple[str, ...] = (),
    ) -> None:
        """Sets `result.reference`; a VALID that does not prove the reference is
        downgraded. `modules`: what the snippet imports; it must import every
        module the reference imports (else the names its statement uses could
        be the snippet's own constants, and the printed types still agree)."""
        if pinned.problem is not None:
            result.reference = ReferenceCheck(
                reason=ReferenceReason.REFERENCE_INVALID,
                detail=pinned.problem,
                declarations=reference.names,
                cached_reference=cached,
            )
            if result.status is Status.VALID:
                result.status = Status.REJECTED
                result.error = f"reference check: {pinned.problem}"
            return
        if outcome is None:
            return  # the snippet never ran (timeout, crash): its status says so
        missing = [m for m in reference.split.modules if m not in modules]
        if missing:
            check = ReferenceCheck(
                passed=False,
                reason=ReferenceReason.STATEMENT_MISMATCH,
                declaration=reference.names[0],
                detail=f"the snippet does not import {', '.join(missing)}, which the reference "
                "imports: the names its statement uses could be the snippet's own",
                declarations=reference.names,
            )
        else:
            check = compare(
                reference,
                pinned.answers,
                answers_of(outcome, reference),
                frozenset(self.config.axioms.allowed),
            )
        check.cached_reference = cached
        check.query_s = outcome.reference_s
        result.reference = check
        if result.status is Status.VALID and not check.passed:
            result.status = Status.INVALID
            result.error = (
                f"reference check: {check.reason.name} {check.declaration}: {check.detail}"
            )


def answers_of(outcome: BodyOutcome, reference: Reference) -> dict[str, DeclAnswer]:
    raw = outcome.reference_response
    if raw is None:
        return {}
    response = repl.as_response(raw)
    triples = [
        (m.severity, m.pos.line if m.pos is not None else 0, m.data) for m in response.messages
    ]
    return read_answers(triples, reference.names)
