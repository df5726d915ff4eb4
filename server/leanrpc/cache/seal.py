"""Authenticated entries: an HMAC-SHA256 over key and value for the disk and
Redis tiers, and where the secret comes from.

Owns the seal format and the secret's sources; imports config's owner-only
file check and ConfigError only.

Anyone who can write to `cache_dir` or to Redis could otherwise set any
verdict: an entry is trusted only when its MAC, keyed with a secret the
writer cannot read, matches. Layout of a sealed value: the 4-byte magic
`LRS1`, 32 bytes of HMAC-SHA256(secret, key || 0x00 || entry), the entry
(codec bytes). The memory tier holds unsealed entries (same process).

Secret sources, first that is set: `[cache] secret_file` (owner-only, like
token files), `$LEANRPC_CACHE_SECRET`. The shared tier needs one (servers
with the same secret share entries; with different ones they never trust,
nor even touch, each other's: the Redis keys carry a label of the secret,
`Sealer.namespace`). The disk tier without one keeps a per-server secret in
`<cache_dir>/.secret` (created 0600 on first start).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from ..config import ConfigError, check_private_file

MAGIC = b"LRS1"
MAC_BYTES = 32
SECRET_ENV = "LEANRPC_CACHE_SECRET"
DISK_SECRET_NAME = ".secret"
MIN_SECRET_BYTES = 16


class ForgedEntry(ValueError):
    """A sealed value whose MAC does not match: forged, edited, or another secret's."""


class Sealer:
    """Seals and opens entries under one secret."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes) -> None:
        if len(secret) < MIN_SECRET_BYTES:
            raise ConfigError(
                f"cache secret is too short ({len(secret)} bytes; at least {MIN_SECRET_BYTES})"
            )
        self._secret = secret

    def _mac(self, key: str, entry: bytes | memoryview) -> bytes:
        mac = hmac.new(self._secret, key.encode(), hashlib.sha256)
        mac.update(b"\0")
        mac.update(entry)
        return mac.digest()

    @property
    def namespace(self) -> str:
        """A label of this secret for the shared tier's keys: servers with
        different secrets write and read different keys, so neither touches
        (overwrites, or drops as forged) the other's entries. Derived with the
        HMAC, not a plain digest, so the label says nothing about the secret."""
        return hmac.new(self._secret, b"leanrpc redis namespace", hashlib.sha256).hexdigest()[:32]

    def seal(self, key: str, entry: bytes) -> bytes:
        return MAGIC + self._mac(key, entry) + entry

    def open(self, key: str, sealed: bytes) -> bytes:
        """The entry inside `sealed`, or ForgedEntry."""
        head = len(MAGIC) + MAC_BYTES
        if len(sealed) < head or not sealed.startswith(MAGIC):
            raise ForgedEntry("entry carries no MAC")
        entry = memoryview(sealed)[head:]
        if not hmac.compare_digest(sealed[len(MAGIC) : head], self._mac(key, entry)):
            raise ForgedEntry(
                "MAC does not match (edited, forged, or written under another secret)"
            )
        return bytes(entry)


def read_private(path: str, key: str) -> bytes:
    """The stripped contents of the owner-only file `path` (config key `key`); b"" when path is ""."""
    if not path:
        return b""
    check_private_file(path, key)
    try:
        data = Path(path).read_bytes().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read {key} {path!r}: {exc.strerror}") from exc
    if not data:
        raise ConfigError(f"{key} {path!r} is empty")
    return data


def configured_secret(section) -> bytes | None:
    """The cluster secret `[cache]` names (secret_file, else $LEANRPC_CACHE_SECRET), or None."""
    path = getattr(section, "secret_file", "")
    if path:
        return read_private(path, "cache.secret_file")
    env = os.environ.get(SECRET_ENV, "").strip()
    return env.encode() if env else None


def disk_secret(root: Path) -> bytes:
    """This server's own disk secret in `<root>/.secret`, created on first use."""
    path = root / DISK_SECRET_NAME
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_hex(32).encode())
            f.flush()
            os.fsync(f.fileno())
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ConfigError(
            f"cannot read the disk cache secret {str(path)!r}: {exc.strerror}"
        ) from exc
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise ConfigError(
                f"disk cache secret {str(path)!r} is not an owner-only file of this user; "
                f"remove it (a new one is made) or chmod 600 it"
            )
        secret = f.read().strip()
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigError(
            f"disk cache secret {str(path)!r} is too short; remove it and a new one is made"
        )
    return secret
