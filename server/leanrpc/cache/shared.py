"""The shared tier: entries in Redis, for every node of a cluster.

Owns the Redis connection, its timeouts and the circuit breaker that keeps a
dead Redis from adding latency to every call; imports this package's seal
and ConfigError only.

Redis may need a password, an ACL user or TLS: in the URL, which redis-py
reads (`redis://user:password@host:6379/0`, `rediss://…` for TLS), or from
`[cache] redis_username`, `redis_password_file` (owner-only, so the password
stays out of the config and the process list) and `redis_tls_ca_file` (the CA
that signs a `rediss://` server's certificate; the certificate and host name
are verified). The URL is logged with its password masked. The tier does not
start without a cache secret: values are sealed with it, and keys are
`leanrpc:result:<label>:<key>`, the label derived from the secret
(seal.Sealer.namespace), so a server with another secret never reads,
overwrites or deletes this one's entries (issue 43).

At most MAX_IN_FLIGHT calls are on the network at once (redis-py's pool
refuses a 101st connection with "Too many connections": a burst of a GRPO
group's background writes used to trip the breaker that way); the rest wait
for a place.

Every failure (refused, timed out, reset, garbage) is a miss or a dropped
write, logged as a warning, never an exception to the caller. After
`failure_limit` consecutive failures the breaker opens: for `cooldown_s`
every call is an immediate miss without touching the network; then one call
is let through to probe, and success closes the breaker again.
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.parse

from ..config import ConfigError
from .seal import Sealer

log = logging.getLogger("leanrpc.cache")

KEY_PREFIX = "leanrpc:result:"
MAX_IN_FLIGHT = 64  # below redis-py's default pool of 100 connections


def masked_url(url: str) -> str:
    """`url` with its password (if any) shown as ***."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparseable Redis URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


class CircuitBreaker:
    """Consecutive-failure breaker with a cooldown and a single probe."""

    def __init__(
        self, failure_limit: int = 3, cooldown_s: float = 5.0, clock=time.monotonic
    ) -> None:
        self.failure_limit = failure_limit
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._failures = 0
        self._open_until: float | None = None
        self._probing = False
        self.trips = 0

    @property
    def is_open(self) -> bool:
        return self._open_until is not None

    def allow(self) -> bool:
        if self._open_until is None:
            return True
        if self._probing or self._clock() < self._open_until:
            return False
        self._probing = True  # one caller probes; the rest still skip
        return True

    def record_success(self) -> None:
        self._failures = 0
        self._open_until = None
        self._probing = False

    def record_failure(self) -> None:
        self._failures += 1
        self._probing = False
        if self._open_until is not None or self._failures >= self.failure_limit:
            if self._open_until is None:
                self.trips += 1
            self._open_until = self._clock() + self.cooldown_s


class RedisStore:
    name = "redis"

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 0.25,
        ttl_s: int = 7 * 24 * 3600,
        breaker: CircuitBreaker | None = None,
        secret: bytes | None = None,
        username: str = "",
        password: str = "",
        tls_ca_file: str = "",
    ) -> None:
        if not secret:
            raise ConfigError(
                "cache.redis_url needs a cache secret: set [cache] secret_file (an owner-only file) "
                "or $LEANRPC_CACHE_SECRET, the same on every server sharing this Redis"
            )
        self.sealer = Sealer(secret)
        self.prefix = f"{KEY_PREFIX}{self.sealer.namespace}:"  # this secret's keys only
        try:
            import redis.asyncio as aioredis
        except ModuleNotFoundError as exc:
            raise ConfigError(
                "cache.redis_url needs the redis package: pip install 'leanrpc[redis]'"
            ) from exc

        self.url = masked_url(url)  # for logs
        self.ttl_s = ttl_s
        self.breaker = breaker or CircuitBreaker()
        self.failures = 0
        self._places = asyncio.Semaphore(MAX_IN_FLIGHT)
        extra: dict = {}
        if username:
            extra["username"] = username
        if password:
            extra["password"] = password
        if tls_ca_file:
            if not url.startswith("rediss://"):
                raise ConfigError("cache.redis_tls_ca_file needs a rediss:// cache.redis_url (TLS)")
            extra["ssl_ca_certs"] = tls_ca_file
        if url.startswith("rediss://"):
            extra["ssl_cert_reqs"] = "required"
            extra["ssl_check_hostname"] = True
        self._client = aioredis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry_on_timeout=False,
            health_check_interval=0,
            **extra,
        )

    async def get(self, key: str) -> bytes | None:
        if not self.breaker.allow():
            return None
        try:
            async with self._places:
                data = await self._client.get(self.prefix + key)
        except Exception as exc:  # redis, OS and timeout errors alike
            self._failed("read", exc)
            return None
        self.breaker.record_success()
        return data

    async def put(self, key: str, data: bytes) -> None:
        if not self.breaker.allow():
            return
        try:
            async with self._places:
                await self._client.set(self.prefix + key, data, ex=self.ttl_s)
        except Exception as exc:
            self._failed("write", exc)
            return
        self.breaker.record_success()

    async def discard(self, key: str) -> None:
        if not self.breaker.allow():
            return
        try:
            async with self._places:
                await self._client.delete(self.prefix + key)
        except Exception as exc:
            self._failed("delete", exc)
            return
        self.breaker.record_success()

    def _failed(self, what: str, exc: Exception) -> None:
        self.failures += 1
        was_open = self.breaker.is_open
        self.breaker.record_failure()
        if not was_open:
            log.warning(
                "result cache: Redis %s failed at %s (%s: %s); treated as a miss%s",
                what,
                self.url,
                type(exc).__name__,
                exc,
                f"; skipping Redis for {self.breaker.cooldown_s:g} s"
                if self.breaker.is_open
                else "",
            )

    async def close(self) -> None:
        try:
            await self._client.aclose()
        except Exception:  # pragma: no cover - closing a dead connection
            pass
