"""The shared tier against a real redis-server that wants an ACL user and
password, or TLS: the `[cache]` keys reach it, wrong credentials or an
unverified certificate are misses (never an answer, never a crash), and the
password never reaches the log."""

from __future__ import annotations

import logging
import shutil
import subprocess

import pytest

from cache_support import TEST_SECRET, RedisServer, cached_config, live_redis_store
from leanrpc.cache.build import build_cache
from leanrpc.config import ConfigError
from leanrpc.results import Status, VerifyResult

KEY = "cd" + "1" * 62
PASSWORD = "acl-pass-9f8e7d"


def _section(tmp_path, url: str, **keys):
    # cached_config's Redis timeout (REDIS_TIMEOUT_S) leaves a loaded box its slow TLS handshakes.
    section = cached_config(redis_url=url, **keys).cache
    secret = tmp_path / "secret"
    secret.write_text(TEST_SECRET)
    secret.chmod(0o600)
    section.secret_file = str(secret)
    return section


def _password_file(tmp_path, password: str):
    path = tmp_path / f"redis-password-{password[:4]}"
    path.write_text(password + "\n")
    path.chmod(0o600)
    return str(path)


async def _round_trip(section) -> tuple[object, object]:
    """Stores an entry through one cache and looks it up from a second one."""
    writer, reader = build_cache(section), build_cache(section)
    try:
        writer.store(
            KEY, "run-1", VerifyResult(id="x", status=Status.INVALID, error="type mismatch")
        )
        await writer.flush()
        return await reader.lookup(KEY), reader.shared
    finally:
        await writer.close()
        await reader.close()


async def test_an_acl_user_with_a_password_file(tmp_path, caplog):
    server = RedisServer(tmp_path, acl_user=("leanrpc", PASSWORD))
    server.start()
    try:
        url = f"redis://127.0.0.1:{server.port}/0"
        hit, _ = await _round_trip(
            _section(
                tmp_path,
                url,
                redis_username="leanrpc",
                redis_password_file=_password_file(tmp_path, PASSWORD),
            )
        )
        assert hit is not None and hit[1] == "redis" and hit[0].result.status is Status.INVALID
        # A wrong password (here in the URL): every call is a logged miss, and
        # the log never shows it.
        with caplog.at_level(logging.INFO, logger="leanrpc.cache"):
            hit, shared = await _round_trip(
                _section(tmp_path, f"redis://leanrpc:wrong-{PASSWORD}@127.0.0.1:{server.port}/0")
            )
        assert hit is None and shared.failures >= 1
        assert (
            "treated as a miss" in caplog.text
            and PASSWORD not in caplog.text
            and "***" in caplog.text
        )
    finally:
        server.stop()


def test_a_password_file_others_can_read_is_refused(tmp_path):
    loose = _password_file(tmp_path, PASSWORD)
    (tmp_path / loose).chmod(0o644)
    with pytest.raises(ConfigError, match="readable by group or others"):
        build_cache(_section(tmp_path, "redis://127.0.0.1:1/0", redis_password_file=loose))
    with pytest.raises(ConfigError, match="needs a rediss://"):
        build_cache(
            _section(tmp_path, "redis://127.0.0.1:1/0", redis_tls_ca_file=str(tmp_path / "ca.pem"))
        )


def _certificates(folder):
    """A CA and a server certificate for localhost / 127.0.0.1, made with openssl."""
    if shutil.which("openssl") is None:
        pytest.fail(
            "openssl is needed to make the TLS test's certificates (apt-get install -y openssl)"
        )

    def run(*args):
        return subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=leanrpc-test-ca",
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    )
    (folder / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "1",
        "-extfile",
        "san.ext",
    )
    return folder / "server.pem", folder / "server.key", folder / "ca.pem"


async def test_tls_with_the_servers_ca_and_not_without_it(tmp_path):
    cert, key, ca = _certificates(tmp_path)
    server = RedisServer(tmp_path, password=PASSWORD, tls=(cert, key, ca))
    server.start()
    try:
        url = f"rediss://localhost:{server.port}/0"
        password = _password_file(tmp_path, PASSWORD)
        hit, _ = await _round_trip(
            _section(tmp_path, url, redis_password_file=password, redis_tls_ca_file=str(ca))
        )
        assert hit is not None and hit[1] == "redis"
        # Without the CA the certificate is not trusted: a miss, not an answer.
        hit, shared = await _round_trip(_section(tmp_path, url, redis_password_file=password))
        assert hit is None and shared.failures >= 1
        # Plain redis:// to the TLS port gets nothing either.
        hit, shared = await _round_trip(
            _section(tmp_path, f"redis://localhost:{server.port}/0", redis_password_file=password)
        )
        assert hit is None and shared.failures >= 1
    finally:
        server.stop()


async def test_a_burst_of_300_writes_is_not_refused_by_the_connection_pool(redis_server):
    from leanrpc.cache import MemoryStore, ResultCache

    cache = ResultCache(
        MemoryStore(1 << 20), shared=live_redis_store(redis_server.url, TEST_SECRET.encode())
    )
    try:
        for i in range(300):  # a GRPO group's worth of background writes at once
            cache.store(f"{i:064x}", "run", VerifyResult(id="x", status=Status.VALID))
        await cache.flush()
        assert cache.shared.failures == 0 and not cache.shared.breaker.is_open
        assert (
            await ResultCache(MemoryStore(1 << 20), shared=cache.shared).lookup(f"{299:064x}")
            is not None
        )
    finally:
        await cache.close()
