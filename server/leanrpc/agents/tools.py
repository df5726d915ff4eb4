"""The agents' tools on the server's own services: one method per MCP tool.

Owns: what each tool does with its arguments, for one caller (the identity
edge/identity.py gave it at the door), returning plain dicts
(agents/shapes.py). Nothing here re-implements a service: a snippet is
resolved once by the doors' one resolver (services.resolve: validation,
header split, timeout, code policy, axioms, cache key) and run by the same
`Verifier.run` as gRPC and REST; proof states are the Prover's (its registry
owns ids, ownership and quotas: another caller's id is NOT_FOUND); Extract is
the Extract service; lean_search reads Formalize's Mathlib name index
(formalize.retrieval: System A, did-you-mean on a name; System B, BM25 on
words), shared with the Formalizer through `load_names`' one copy per path.

Every call counts against the caller's `server.max_concurrent_per_client`
(edge/limiter.py, the limiter every door uses) and carries its identity into
the pool, where fair admission takes one job per client in turn.
May import: config, errors, results, services, formalize (config, retrieval),
edge.limiter, agents.shapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
from typing import Any

from ..config import Config
from ..edge.limiter import ClientLimiter, LimitExceeded
from ..errors import LeanServiceError, OverloadedError, RequestError
from ..formalize.config import find_mathlib_names
from ..formalize.retrieval import load_names
from ..services.extract import ExtractService
from ..services.ports import Verifier
from ..services.prover import ProverService
from ..services.requests import Caller
from ..services.resolve import VerifyOptions
from . import shapes

__all__ = ["AgentTools"]

# A query that is one dotted identifier asks for a name (System A), else for words (System B).
_NAME = re.compile(r"^[A-Za-z_][\w.'!?₀-₉]*$")


class AgentTools:
    """The tool set over one server's services; one instance per MCP door."""

    def __init__(
        self, verify: Verifier, prover: ProverService, extract: ExtractService, config: Config
    ) -> None:
        self._verify = verify
        self._prover = prover
        self._extract = extract
        self._config = config
        self._allowed = frozenset(config.axioms.allowed)
        self.limiter = ClientLimiter(config.server.max_concurrent_per_client)
        self._calls = itertools.count(1)

    # ---- the caller's share -------------------------------------------------

    @contextlib.contextmanager
    def call(self, client: str):
        """One tool call of `client`, counted against its limit (OVERLOADED past it)."""
        try:
            self.limiter.enter(client)
        except LimitExceeded as exc:
            raise OverloadedError(exc.message, retry_after_s=1.0) from None
        try:
            yield
        finally:
            self.limiter.leave(client)

    def _stream(self) -> str:
        return f"mcp-{next(self._calls)}"

    # ---- verdicts -------------------------------------------------------------

    async def _run(self, code: str, options: VerifyOptions, client: str, snippet_id: str):
        resolved = self._verify.resolver.resolve(
            snippet_id, code, options, client_id=client, stream_id=self._stream()
        )
        if resolved.refused is None:
            self._verify.admission(1)  # the pool's one admission check (OVERLOADED with a hint)
        return await self._verify.run(resolved)

    async def check(self, client: str, code: str, profile: str, timeout_s: float) -> dict:
        options = VerifyOptions(timeout_s=timeout_s, profile=profile)
        result = await self._run(code, options, client, "lean_check")
        return shapes.result_of(result, self._allowed)

    async def verify_proof(
        self, client: str, statement: str, proof: str, allowed_axioms: list[str] | None
    ) -> dict:
        allowed = self._allowed
        if allowed_axioms is not None:
            wider = sorted(set(allowed_axioms) - self._allowed)
            if wider:
                raise RequestError(
                    f"allowed_axioms may only narrow the server's list ([axioms] allowed: "
                    f"{', '.join(sorted(self._allowed)) or 'none'}); not allowed here: {', '.join(wider)}",
                    field="allowed_axioms",
                )
            allowed = frozenset(allowed_axioms)
        if not statement.strip():
            raise RequestError("statement is empty", field="statement")
        options = VerifyOptions(reference=statement, check_axioms=True)
        result = await self._run(proof, options, client, "lean_verify_proof")
        shaped = shapes.result_of(result, allowed)
        checks = shaped["checks"]
        shaped["proved"] = (
            shaped["status"] == "VALID"
            and checks["statement"] == "PASSED"
            and checks["axioms"] == "PASSED"
            and checks["judge"] != "FAILED"
        )
        shaped["allowed_axioms"] = sorted(allowed)
        return shaped

    # ---- proof states -----------------------------------------------------------

    async def proof_state(self, client: str, code_with_sorry: str, timeout_s: float) -> dict:
        start = self._prover.resolve_start(
            code_with_sorry, timeout_s=timeout_s, caller=Caller(client)
        )
        started = await self._prover.start_proof(start)
        return {
            "proof_id": started.proof_id,
            "states": [shapes.state_of(s) for s in started.states],
            "messages": [shapes.message_of(m) for m in started.messages],
            "verifier": shapes.identity_of(started.verifier),
        }

    async def tactic(self, client: str, state_id: str, tactic: str, timeout_s: float) -> dict:
        step = self._prover.resolve_expand(
            state_id, (tactic,), timeout_s=timeout_s, caller=Caller(client)
        )
        return shapes.tactic_of(await self._prover.run_tactic(step), self._allowed)

    async def multi_attempt(
        self, client: str, state_id: str, tactics: list[str], timeout_s: float
    ) -> dict:
        """Each tactic as its own pool job, in parallel across the pool (as Expand's
        pairs run); one answer per tactic, in order; a refused tactic is refused alone."""
        limit = self._config.mcp.max_attempts
        if not tactics:
            raise RequestError("tactics is empty: give at least one", field="tactics")
        if len(tactics) > limit:
            raise RequestError(
                f"{len(tactics)} tactics, over the limit of {limit} ([mcp] max_attempts)",
                field="tactics",
            )
        self._prover.registry.get(state_id, client)  # another agent's state: NOT_FOUND, once

        async def one(tactic: str) -> dict:
            try:
                step = self._prover.resolve_expand(
                    state_id, (tactic,), timeout_s=timeout_s, caller=Caller(client)
                )
                out = await self._prover.run_tactic(step)
            except LeanServiceError as exc:
                return {"tried": tactic, "status": "REJECTED", **shapes.error_of(exc)}
            return shapes.tactic_of(out, self._allowed)

        attempts = await asyncio.gather(*(one(t) for t in tactics))
        return {"state_id": state_id, "attempts": list(attempts)}

    def release(self, client: str, state_ids: list[str], proof_ids: list[str]) -> dict:
        if not state_ids and not proof_ids:
            raise RequestError("name at least one state id (or proof id) to release")
        released, unknown = self._prover.release(state_ids, proof_ids, client_id=client)
        return {"released": released, "not_found": list(unknown)}

    # ---- extract, search ---------------------------------------------------------

    async def extract(self, client: str, code: str, timeout_s: float) -> dict:
        options = VerifyOptions(timeout_s=timeout_s, infotree="original")
        resolved = self._verify.resolver.resolve(
            "lean_extract", code, options, client_id=client, stream_id=self._stream()
        )
        if resolved.refused is None:
            self._verify.admission(1)
        result, declarations, _ = await self._extract.extract(resolved)
        shaped = shapes.result_of(result, self._allowed)
        shaped["declarations"] = [
            {
                "name": d.name,
                "start": shapes.position_of(d.start),
                "end": shapes.position_of(d.end),
                "steps": [
                    {
                        "text": s.text,
                        "start": shapes.position_of(s.start),
                        "end": shapes.position_of(s.end),
                        "goals_before": list(s.goals_before),
                        "goals_after": list(s.goals_after),
                    }
                    for s in d.steps
                ],
            }
            for d in declarations
        ]
        return shaped

    def _names_path(self) -> str | None:
        path = self._config.formalize.mathlib_names_path
        return find_mathlib_names() if path == "auto" else (path or None)

    async def search(self, client: str, query: str, k: int) -> dict:
        query = query.strip()
        if not query:
            raise RequestError("query is empty", field="query")
        limit = self._config.mcp.max_search_k
        if not 1 <= k <= limit:
            raise RequestError(f"k must be from 1 to {limit} ([mcp] max_search_k)", field="k")
        path = self._names_path()
        if not path:
            raise RequestError(
                "no Mathlib name index on this server ([formalize] mathlib_names_path, "
                "$LEANRPC_MATHLIB_NAMES)"
            )
        try:
            names = await asyncio.to_thread(load_names, path)
        except OSError as exc:
            raise RequestError(f"the Mathlib name index cannot be read: {exc.strerror}") from exc
        found: list[dict[str, Any]] = []
        if _NAME.match(query):
            exact = query in names
            close = await asyncio.to_thread(names.did_you_mean, query, k)
            for name in ([query] if exact else []) + close:
                found.append({"name": name, "system": "A (name)", "exact": name == query})
        hits = await asyncio.to_thread(names.search, query, k)
        seen = {f["name"] for f in found}
        for name, kind, module in hits:
            if name not in seen:
                found.append({"name": name, "kind": kind, "module": module, "system": "B (words)"})
        return {
            "query": query,
            "results": found[:k],
            "index": f"Mathlib declaration names ({len(names)}; a snapshot: Lean still checks every name)",
        }

    # ---- the server and this agent ------------------------------------------------

    def environments(self, client: str) -> dict:
        """The REPL profiles this caller may name, each with its toolchain (once booted)."""
        snapshot = self._verify.info()
        resolver = self._verify.resolver
        out = []
        for name in ["", *sorted(self._config.repl.profiles)]:
            try:
                resolver.access.check(name, client)
            except LeanServiceError:
                continue  # not open to this caller: not shown either
            identity = snapshot.profiles.get(name) if name else snapshot.identity
            out.append(
                {
                    "profile": name,
                    "default": name == "",
                    "warm": identity is not None,
                    "policy": resolver.policy.of(name, client),
                    "toolchain": shapes.identity_of(identity),
                }
            )
        return {"environments": out, "allowed_axioms": sorted(self._allowed)}

    def status(self, client: str) -> dict:
        """Workers, the queue, and this caller's own usage against its limits."""
        snapshot = self._verify.info()
        registry, limits = self._prover.registry, self._prover.limits
        calls_limit = self.limiter.limit
        return {
            "serving": snapshot.serving,
            "not_serving_reason": snapshot.not_serving_reason,
            "workers": snapshot.size,
            "worker_states": dict(snapshot.worker_states),
            "queue_depth": snapshot.queue_depth,
            "queue_limit": snapshot.queue_limit,
            "you": {
                "identity": client,
                # this call included
                "calls_in_flight": self.limiter.in_flight.get(client, 0),
                "calls_limit": calls_limit or None,
                "proof_states": registry.live_states(client),
                "proof_states_limit": limits.max_states_per_client,
                "proof_mb": round(registry.held_bytes(client) / 2**20, 3),
                "proof_mb_limit": limits.max_mb_per_client,
            },
        }
