"""`CachedVerifier`: the verify service with a result cache and single-flight.

Owns the decision, per request, between a stored verdict, an identical
snippet in flight and a new elaboration; imports the services' request and
interface types (services.resolve, services.ports) and this package. It
wraps the verify service, held as a `services.ports.VerifyBackend`, and
offers the same explicit `Verifier` interface (no attribute forwarding, no
reach into the service's pool), so wiring it is one line in the composition root:

    verify = CachedVerifier.from_config(VerifyService(pool, config), config, sandbox=launcher.describe())

Per request (resolved once by the door, services.resolve; the key comes with
it, from this wrapper's key port):

1. The code policy's answer, when the request has one (never looked up).
2. Bypass (straight to the service) when the request has no key: a session,
   `options.cache = False`, a pinned or `trusted` snippet, or while the
   verifier identity is unknown (no worker has booted yet).
3. Memory hit whose original body fits the caller's timeout: answered now.
4. Otherwise one flight per (key, timeout): the leader looks in disk and
   Redis, else elaborates on the pool and stores a deterministic verdict;
   every caller of the flight gets the verdict under its own id.

Every stored entry records its provenance (server start, worker, pid, code
policy: codec.Provenance); when the pool reports a worker poisoned, the
entries it produced are withdrawn from every tier, and an answer of a worker
already poisoned is not stored (provenance.py says why that is the latest
point the exchange order allows).

A joiner takes the flight's verdict when it is deterministic, or when the
flight ran under the same timeout and a deadline no earlier than its own
(then a TIMEOUT is the answer it would have got). Otherwise, and when the
flight was cancelled or failed with the leader's own error, it elaborates
for itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from ..config import Config
from ..core.headers import HeaderSplit
from ..pool import PoolSnapshot
from ..results import Status, VerifyResult
from ..services.ports import Verifier, VerifyBackend
from ..services.resolve import Resolved, VerifyOptions
from ..services.sessions import SessionService
from . import codec
from .codec import verdict_copy
from .keys import VerifierSettings, cache_key, is_cacheable
from .provenance import END_STATES, ProvenanceIndex
from .singleflight import SingleFlight
from .tiers import ResultCache

log = logging.getLogger("leanrpc.cache")

IN_FLIGHT = "in-flight"


class _Landing:
    """What one flight produced, shared by all its callers."""

    __slots__ = ("result", "source", "run", "deadline", "cacheable")

    def __init__(
        self, result: VerifyResult, source: str, run: str, deadline: float | None, cacheable: bool
    ) -> None:
        self.result = result
        self.source = source  # "" elaborated now, else the tier of a hit
        self.run = run
        self.deadline = deadline
        self.cacheable = cacheable


class CachedVerifier:
    """The verify service with a result cache; offers the same `Verifier`
    interface (services.ports) as the service it wraps."""

    def __init__(
        self,
        service: VerifyBackend,
        cache: ResultCache,
        *,
        environments: dict[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.service = service
        self.cache = cache
        self.environments = environments or {}  # per profile: settings in every key
        self.flights = SingleFlight()
        self._by_profile: dict[str, VerifierSettings] = {}
        self.provenance = ProvenanceIndex()
        # The service's resolver, with this cache's keys: a door resolves a
        # request once and the key comes with it.
        self.resolver = service.resolver.with_keys(self._key_of)
        service.add_worker_listener(self._on_worker_state)

    # ---- the Verifier interface (services.ports) -------------------------------

    @property
    def config(self) -> Config:
        return self.service.config

    @property
    def sessions(self) -> SessionService:
        return self.service.sessions

    def admission(self, count: int = 1) -> None:
        self.service.admission(count)

    def info(self) -> PoolSnapshot:
        return self.service.info()

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
        return await self.run(
            self.resolver.resolve(
                snippet_id,
                code,
                options,
                client_id=client_id,
                stream_id=stream_id,
                deadline=deadline,
            )
        )

    async def run(self, request: Resolved) -> VerifyResult:
        result = await self._run(request)
        if not result.policy:  # a stored verdict: only `proof` results are ever stored
            result.policy = "proof"
            result.axioms_checked = request.check_axioms
        return result

    async def close(self) -> None:
        await self.cache.close()

    # ---- keys and settings -------------------------------------------------------

    def _on_worker_state(self, worker: Any, _old: Any, new: Any) -> None:
        """Pool state listener: a worker's end forgets (or, poisoned, withdraws) its entries."""
        if getattr(new, "value", None) not in END_STATES:
            return
        cause = getattr(worker.exit_cause, "value", None)
        entries = self.provenance.ended(worker.name, cause)
        if worker.name in self.provenance.poisoned:
            self.cache.revoked.add((self.provenance.server, worker.name))
        if entries:
            count = self.cache.withdraw(entries)
            log.warning(
                "result cache: worker %s was poisoned; withdrew the %d entries it produced "
                "(memory, disk, Redis)",
                worker.name,
                count,
            )

    @classmethod
    def from_config(cls, service: VerifyBackend, config: Any, *, sandbox: str = "") -> Verifier:
        """`service` wrapped per `config.cache`; `service` itself when disabled."""
        from .build import build_cache, key_environments

        section = getattr(config, "cache", None)
        if section is None or not section.enabled:
            return service
        return cls(service, build_cache(section), environments=key_environments(config, sandbox))

    def _key_of(
        self,
        profile: str,
        split: HeaderSplit,
        infotree: str | None,
        axiom_rules: bool | str,
        command_options: str = "",
    ) -> str | None:
        """The resolver's key port (services.resolve.KeyPort): None while the
        profile's verifier identity is unknown (no worker of it booted yet)."""
        settings = self.settings(profile)
        if settings is None:
            return None
        return cache_key(
            settings,
            split,
            infotree=infotree,
            check_axioms=axiom_rules,
            command_options=command_options,
        )

    def settings(self, profile: str = "") -> VerifierSettings | None:
        """The cache settings of one REPL profile: its own identity, so its
        keys never meet another toolchain's."""
        identity = self.service.identity_of(profile)
        if identity is None:
            return None
        settings = self._by_profile.get(profile)
        if settings is None or settings.identity != identity:
            settings = self._by_profile[profile] = VerifierSettings(
                identity, self.environments.get(profile, ())
            )
            if not settings.fully_identified and self.cache.tiers:
                log.warning(
                    "result cache: the Lean identity%s has no REPL or project revision "
                    "([repl] repl_revision / project_revision); disk and Redis tiers are off",
                    f" of profile {profile!r}" if profile else "",
                )
        return settings

    # ---- one request ---------------------------------------------------------------

    async def _run(self, request: Resolved) -> VerifyResult:
        arrived = time.monotonic()
        # The code policy first: a snippet it keeps from the REPL is never
        # looked up either (an old entry for it is not an answer).
        refused = request.answer()
        if refused is not None:  # it names its policy already
            return refused
        key = request.cache_key
        # No key: a session, `cache = false`, an unknown identity, a pinned
        # snippet (the entry format has no statement check; the reference's
        # own types are cached by services.reference) or a `trusted` result
        # (the caller's own: never shared with anyone).
        if key is None:
            self.cache.stats.bypassed += 1
            return await self.service.run(request)
        snippet_id, deadline = request.snippet_id, request.deadline
        timeout = request.timeout_s
        settings = self.settings(request.profile)
        shared_tiers = settings is not None and settings.fully_identified

        async def fly() -> _Landing:
            hit = await self._lookup(key, timeout, shared_tiers)
            if hit is not None:
                verdict, source = hit
                return _Landing(
                    verdict.answer(snippet_id, source=source, total_s=0.0),
                    source,
                    verdict.run,
                    deadline,
                    True,
                )
            run = uuid.uuid4().hex
            result = await self.service.run(request)
            result.reuse.original_run = run
            cacheable = is_cacheable(result.status, result.error)
            if cacheable:
                self._store(key, run, result, shared_tiers, request.policy)
            else:
                self.cache.stats.not_cacheable += 1
            return _Landing(result, "", run, deadline, cacheable)

        # Fast path: a memory hit needs no flight.
        verdict = self._memory_hit(key, timeout)
        if verdict is not None:
            return verdict.answer(snippet_id, source="memory", total_s=time.monotonic() - arrived)
        flight_key = (key, timeout)
        joining = self.flights.running(flight_key)
        try:
            landing, joined = await self.flights.run(flight_key, fly)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not joining or (current is not None and current.cancelling()):
                raise  # this caller was cancelled
            landing = None  # the flight was cancelled under a joiner
        except Exception:
            if not joining:
                raise  # the leader's own error (overload, not serving...)
            landing = None
        if landing is None:
            return await self.service.run(request)
        if not joined:
            if landing.source:
                landing.result.timings.total_s = time.monotonic() - arrived
            return landing.result
        if landing.cacheable or _same_deadline_or_later(landing.deadline, deadline):
            if landing.result.status is not Status.CANCELLED:
                self.cache.stats.joined += 1
                return _joined_answer(landing, snippet_id, time.monotonic() - arrived)
        # The flight's outcome was the leader's own (its earlier deadline, a
        # cancel): elaborate for this caller.
        return await self.service.run(request)

    def _memory_hit(self, key: str, timeout: float):
        verdict = self.cache.memory_verdict(key)
        if verdict is None:
            return None
        if verdict.body_s > timeout:
            self.cache.stats.too_slow += 1
            return None
        self.cache.stats.lookups += 1
        self.cache.stats.hits["memory"] += 1
        return verdict

    async def _lookup(self, key: str, timeout: float, shared_tiers: bool):
        if not shared_tiers:
            verdict = self._memory_hit(key, timeout)
            return None if verdict is None else (verdict, "memory")
        hit = await self.cache.lookup(key)
        if hit is not None and hit[0].body_s > timeout:
            self.cache.stats.too_slow += 1
            return None
        return hit

    def _store(
        self, key: str, run: str, result: VerifyResult, shared_tiers: bool, policy: str = "proof"
    ) -> None:
        worker = result.reuse.worker
        if not self.provenance.may_store(worker):
            self.cache.stats.not_cacheable += 1
            return  # its worker was poisoned while this answer was on its way
        provenance = self.provenance.provenance(
            worker, self.service.worker_pid(worker), policy or "proof"
        )
        try:
            if shared_tiers:
                self.cache.store(key, run, result, provenance)
            else:
                self.cache.memory.put(key, codec.encode(key, run, time.time(), result, provenance))
                self.cache.stats.stored += 1
            self.provenance.record(key, run, worker)
        except Exception as exc:  # never fail an answer because it could not be stored
            self.cache.stats.store_errors += 1
            log.warning("result cache: could not store a verdict (%s)", exc)


def _same_deadline_or_later(flight_deadline: float | None, own_deadline: float | None) -> bool:
    if flight_deadline is None:
        return True
    return own_deadline is not None and flight_deadline >= own_deadline


def _joined_answer(landing: _Landing, snippet_id: str, total_s: float) -> VerifyResult:
    return verdict_copy(
        landing.result,
        snippet_id,
        source=landing.source or IN_FLIGHT,
        run=landing.run,
        total_s=total_s,
    )
