"""`POST /reward`: OpenRLHF's remote reward protocol over the reward core.

Owns the route. OpenRLHF 0.11 (`--remote_rm_url http://host:port/reward`, one or
several URLs, round-robin) posts `{"query": [...], "prompts": [...], "labels": [...]}`
with one query per request, a 180 s total timeout and 5 tries, and reads
`{"rewards": [...], "scores": [...], "extra_logs": {key: [number per query]}}`.
`query` is the decoded prompt plus response, chat special tokens included: the
response is the query after its prompt (or after the last assistant marker), and
the reward core (leanrpc.client.rewards) extracts the code, pins it to the label
(the formal statement), deduplicates, and maps each verdict, as every adapter does.

Behind the gateway's bearer tokens, per-client limiter and queue admission (429 with
Retry-After); answered within `DEADLINE_S` (below OpenRLHF's 180 s). An
infrastructure failure is never a reward: the whole request is answered 503 (with
the per-query details), which OpenRLHF retries and then leaves the reward None.
May import: client.rewards (core, openrlhf: the rules the file form shares), client._convert, edge.convert, errors,
services.resolve, gateway.kimina (encoding), aiohttp, msgspec.
"""

from __future__ import annotations

import asyncio

import msgspec
from aiohttp import web

from ..client._convert import result_from_pb
from ..client.rewards.core import InfraFailure, RewardCore
from ..client.rewards.openrlhf import answer, response_of
from ..client.rewards.problem import Problem
from ..edge.convert import result_to_pb
from ..edge.limiter import LimitExceeded
from ..errors import LeanServiceError, NotServingError, OverloadedError, RequestError
from ..results import Status, VerifyResult
from ..services.resolve import VerifyOptions
from . import kimina
from .refusals import refusal

DEADLINE_S = 120.0  # well inside OpenRLHF's 180 s total, with its retries in mind
PATH = "/reward"


class RewardRequest(msgspec.Struct):
    query: list[str]
    prompts: list[str | None] | None = None  # null: cut the query at its last assistant marker
    labels: list[str] | None = None


def _invalid(msg: str, loc: list | None = None) -> web.Response:
    body = {"detail": [{"type": "value_error", "loc": ["body", *(loc or [])], "msg": msg}]}
    return web.Response(body=kimina.encode(body), status=422, content_type="application/json")


def _answer(payload: dict, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(
        body=kimina.encode(payload), status=status, content_type="application/json", headers=headers
    )


class RewardRoute:
    def __init__(self, gateway, config) -> None:
        self._gateway = gateway  # its access check, caller identity and limiter
        self._verify = gateway._verify
        self._config = config
        self.core = RewardCore(deadline_s=DEADLINE_S)

    async def reward(self, request: web.Request) -> web.Response:
        refused = self._gateway._refuse_access(request)
        if refused is not None:
            return refused
        try:
            body = await asyncio.wait_for(request.read(), self._config.gateway.body_timeout_s)
            parsed = msgspec.json.decode(body, type=RewardRequest)
        except asyncio.TimeoutError:
            return _answer({"detail": "the request body did not arrive in time"}, 408)
        except msgspec.ValidationError as exc:
            return _invalid(str(exc))
        except msgspec.DecodeError as exc:
            return _invalid(f"not JSON: {exc}")
        n = len(parsed.query)
        for name in ("prompts", "labels"):
            given = getattr(parsed, name)
            if given is not None and len(given) != n:
                return _invalid(f"{len(given)} {name} for {n} queries", [name])
        if parsed.labels is None:
            return _invalid("labels (each query's formal statement) are required", ["labels"])
        if n > self._config.server.max_snippets_per_batch:
            return _invalid(f"{n} queries, over the limit of the server's batch size", ["query"])
        prompts = parsed.prompts or [None] * n
        responses = [response_of(q, p) for q, p in zip(parsed.query, prompts)]
        try:
            plan = self.core.plan(responses, [Problem(label) for label in parsed.labels])
        except (ValueError, TypeError) as exc:
            return _invalid(str(exc), ["labels"])
        try:
            self._verify.admission(len(plan.programs))
        except LeanServiceError as exc:  # status from the one error table (edge/errors.py)
            return refusal(exc)
        client = self._gateway._client(request)
        try:
            self._gateway.limiter.enter(client)
        except LimitExceeded as exc:  # this caller has too many calls in flight
            return refusal(exc)
        try:
            results, why = await self._run(plan.programs, client)
        finally:
            self._gateway.limiter.leave(client)
        details = self.core.finish(plan, results, why)
        try:
            return _answer(answer(details))
        except InfraFailure as exc:
            payload = {"detail": str(exc), "details": [d.as_log() for d in exc.details]}
            return _answer(payload, 503, {"Retry-After": "1"})

    async def _run(self, programs, client: str):
        tasks = [asyncio.ensure_future(self._one(code, ref, client)) for code, ref in programs]
        try:
            got = await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE_S)
        except asyncio.TimeoutError:
            return None, f"the reward's deadline ({DEADLINE_S:g} s) passed"
        except BaseException:
            for task in tasks:
                task.cancel()
            raise
        return [result_from_pb(result_to_pb(r)) for r in got], ""

    async def _one(self, code: str, reference: str, client: str) -> VerifyResult:
        options = VerifyOptions(check_axioms=self.core.settings.check_axioms, reference=reference)
        try:
            resolved = self._verify.resolver.resolve(
                "reward", code, options, client_id=client, stream_id="reward"
            )
            return await self._verify.run(resolved)
        except RequestError as exc:  # this program's own fault (too large, a bad statement)
            return VerifyResult(id="reward", status=Status.REJECTED, error=exc.message)
        except (OverloadedError, NotServingError) as exc:  # not run: the infrastructure's
            return VerifyResult(
                id="reward", status=Status.REJECTED, error=exc.message, retry_after_s=1.0
            )
        except LeanServiceError as exc:
            return VerifyResult(id="reward", status=Status.CRASH, error=exc.message)


def routes(gateway, config) -> list:
    route = RewardRoute(gateway, config)
    return [web.post(PATH, route.reward)]
