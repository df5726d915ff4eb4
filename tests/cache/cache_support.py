"""Helpers for tests/cache: servers with a result cache, a real redis-server."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from leanrpc.app import create_server
from leanrpc.cache import RedisStore
from leanrpc.client import AsyncClient
from testkit import free_port, loopback_config

TEST_SECRET = "test-cluster-secret-0123456789abcdef"


# A live Redis must answer within `cache.redis_timeout_s`, the event loop's own pauses
# included; the default (0.25 s) is shorter than a collector pause in a CI process, which once
# turned a read into a miss (tests/cache/test_cache_seal.py). Tests about what is read use this.
REDIS_TIMEOUT_S = 5.0


def live_redis_store(url: str, secret: bytes) -> RedisStore:
    """A RedisStore on a live Redis, given REDIS_TIMEOUT_S to answer."""
    return RedisStore(url, secret=secret, timeout_s=REDIS_TIMEOUT_S)


def cached_config(workers: int = 1, **cache):
    """A loopback config with the result cache on; `cache` sets its fields (a Redis
    timeout of REDIS_TIMEOUT_S unless given)."""
    cache.setdefault("redis_timeout_s", REDIS_TIMEOUT_S)
    config = loopback_config(workers)
    config.cache.enabled = True
    for key, value in cache.items():
        setattr(config.cache, key, value)
    return config


@contextlib.asynccontextmanager
async def cached_server(workers: int = 1, **cache):
    """Yields (app, client) for a server whose verify service has a cache."""
    app = await create_server(cached_config(workers, **cache))
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        yield app, client
    finally:
        await client.close()
        await app.stop(2.0)


def theorem(i: int, proof: str = "rfl", header: str = "import Mathlib") -> str:
    return f"{header}\n\ntheorem t{i} (x : Nat) : x + {i} = x + {i} := by\n  {proof}\n"


class RedisServer:
    """A real redis-server on a free loopback port in a temp dir."""

    def __init__(
        self,
        workdir: Path,
        password: str = "",
        *,
        acl_user: tuple[str, str] | None = None,
        tls: tuple[Path, Path, Path] | None = None,
    ) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail(
                "redis-server is not installed (apt-get install -y redis-server; .ci/run installs it)"
            )
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.password = password  # --requirepass; the url carries it
        self.acl_user = (
            acl_user  # (name, password): the only user (default off), keys leanrpc:* only
        )
        self.tls = tls  # (cert, key, CA): TLS only, on self.port

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        extra = ["--requirepass", self.password] if self.password else []
        if self.acl_user:
            name, password = self.acl_user
            extra += [
                "--user",
                name,
                "on",
                f">{password}",
                "~leanrpc:*",
                "+@all",
                "--user",
                "default",
                "off",
            ]
        ports = ["--port", str(self.port)]
        if self.tls:
            cert, key, ca = self.tls
            ports = [
                "--port",
                "0",
                "--tls-port",
                str(self.port),
                "--tls-cert-file",
                str(cert),
                "--tls-key-file",
                str(key),
                "--tls-ca-cert-file",
                str(ca),
                "--tls-auth-clients",
                "no",
            ]
        self.process = subprocess.Popen(
            [
                self.binary,
                *ports,
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        end = time.monotonic() + 10
        while time.monotonic() < end:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return
            if self.process.poll() is not None:
                pytest.fail(f"redis-server exited with {self.process.returncode}")
            time.sleep(0.02)
        pytest.fail("redis-server did not start listening within 10 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None
