"""Builds the result cache from the `[cache]` config section.

Owns the mapping from config keys to stores; imports the config types and
this package's stores.
"""

from __future__ import annotations

import logging
from typing import Any

from .disk import DiskStore
from .memory import MemoryStore
from .seal import configured_secret, read_private
from .shared import CircuitBreaker, RedisStore, masked_url
from .tiers import ResultCache

log = logging.getLogger("leanrpc.cache")


def build_cache(section: Any) -> ResultCache:
    """A ResultCache with the tiers `section` (a config.CacheConfig) names."""
    memory = MemoryStore(int(section.memory_mb * 2**20))
    secret = configured_secret(section)  # ConfigError: unreadable or not owner-only
    disk = None
    if section.cache_dir:
        disk = DiskStore(
            section.cache_dir, max_bytes=int(section.disk_max_mb * 2**20), secret=secret
        )
    shared = None
    if section.redis_url:
        shared = RedisStore(
            section.redis_url,
            timeout_s=section.redis_timeout_s,
            ttl_s=section.redis_ttl_s,
            breaker=CircuitBreaker(section.breaker_failures, section.breaker_cooldown_s),
            secret=secret,
            username=getattr(section, "redis_username", ""),
            password=read_private(
                getattr(section, "redis_password_file", ""), "cache.redis_password_file"
            ).decode(),
            tls_ca_file=getattr(section, "redis_tls_ca_file", ""),
        )
    log.info(
        "result cache: memory %s MB%s%s",
        section.memory_mb,
        f", disk {section.cache_dir}" if disk else "",
        f", Redis {masked_url(section.redis_url)}" if shared else "",
    )
    return ResultCache(memory, disk=disk, shared=shared)


def key_environments(config: Any, sandbox: str) -> dict[str, tuple[str, ...]]:
    """Per REPL profile ("" = the default), the configured settings besides
    the identity that can change an answer: each profile's own."""
    environments = {}
    for name in config.repl.profile_names:
        repl = config.repl.profile(name)
        environments[name] = (
            f"sandbox={sandbox}",
            f"incrementality={repl.incrementality}",
            f"elab_async={repl.elab_async}",
        )
    return environments
