"""Never pay twice: a result cache and single-flight in front of the verify service.

Owns verdict reuse; may import results, config types, core.headers and the
services' option type, never the pool or the edge. Rooms:

    keys          the cache key (verifier identity + header + body + options)
                  and which statuses may be cached
    codec         an entry as lz4-compressed bytes, checked on read, with its provenance
    seal          the HMAC of disk and Redis entries, and the cluster secret
    provenance    which worker produced which entries; a poisoned one's are withdrawn
    memory        in-process LRU bounded in bytes
    disk          one file per entry, temp + fsync + rename
    shared        Redis, short timeouts, circuit breaker
    tiers         memory -> disk -> Redis lookup, promotion, background writes
    singleflight  identical work in flight runs once
    verifier      CachedVerifier: the VerifyService surface with all of the above
    build         stores from the `[cache]` config section

Data flow of one request (docs/CACHE.md):

    verify(id, code, options)
      -> validate -> key -> memory hit? ------------------------> answer (own id)
      -> flight(key, timeout): disk/Redis hit? else pool verify -> store
      -> every caller of the flight gets the verdict under its own id
"""

from .codec import CachedVerdict, CorruptEntry
from .disk import DiskStore
from .keys import (
    CACHEABLE_STATUSES,
    NEVER_CACHED_STATUSES,
    VerifierSettings,
    cache_key,
    is_cacheable,
)
from .memory import MemoryStore
from .shared import CircuitBreaker, RedisStore
from .singleflight import SingleFlight
from .tiers import CacheStats, ResultCache
from .verifier import CachedVerifier

__all__ = [
    "CACHEABLE_STATUSES",
    "NEVER_CACHED_STATUSES",
    "CacheStats",
    "CachedVerdict",
    "CachedVerifier",
    "CircuitBreaker",
    "CorruptEntry",
    "DiskStore",
    "MemoryStore",
    "RedisStore",
    "ResultCache",
    "SingleFlight",
    "VerifierSettings",
    "cache_key",
    "is_cacheable",
]
