"""The on-disk tier: one file per entry under `cache_dir`, crash-safe.

Owns the directory layout and the write protocol; imports nothing from
leanrpc but this package's seal (the secret). Blocking file I/O runs in a thread so the event loop never waits
on the disk.

Write protocol (a crash at any instant leaves either the old state or the
whole new entry, never a torn file under an entry's name): write the bytes to
a temp file in the same directory, fsync it, rename it over the final name,
fsync the directory. Temp files a crash left behind are removed at start.
A file that is unreadable or does not decode is a miss: the caller logs a
warning and calls `discard`.

Layout: `<cache_dir>/<key[:2]>/<key>.lrc`. With `max_bytes` > 0 the oldest
entries (by modification time) are removed when the total passes the bound.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from pathlib import Path

from .seal import Sealer, disk_secret

log = logging.getLogger("leanrpc.cache")

SUFFIX = ".lrc"
TEMP_PREFIX = ".tmp-"


class DiskStore:
    name = "disk"

    def __init__(
        self, root: str | os.PathLike, *, max_bytes: int = 0, secret: bytes | None = None
    ) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.root.mkdir(parents=True, exist_ok=True)
        # Entries are sealed with the cluster secret, else this server's own.
        self.sealer = Sealer(secret if secret is not None else disk_secret(self.root))
        self.bytes_held = self._scan_and_clean()

    def path_for(self, key: str) -> Path:
        if len(key) < 3 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"not a cache key: {key!r}")
        return self.root / key[:2] / f"{key}{SUFFIX}"

    async def get(self, key: str) -> bytes | None:
        return await asyncio.to_thread(self.get_sync, key)

    async def put(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(self.put_sync, key, data)

    async def discard(self, key: str) -> None:
        await asyncio.to_thread(self.discard_sync, key)

    def get_sync(self, key: str) -> bytes | None:
        try:
            return self.path_for(key).read_bytes()
        except FileNotFoundError:
            return None

    def put_sync(self, key: str, data: bytes) -> None:
        final = self.path_for(key)
        final.parent.mkdir(exist_ok=True)
        temp = final.parent / f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            temp.unlink(missing_ok=True)
            raise
        os.close(fd)
        try:
            old_size = final.stat().st_size
        except FileNotFoundError:
            old_size = 0
        os.replace(temp, final)
        _fsync_dir(final.parent)
        self.bytes_held += len(data) - old_size
        if self.max_bytes and self.bytes_held > self.max_bytes:
            self._trim()

    def discard_sync(self, key: str) -> None:
        path = self.path_for(key)
        try:
            size = path.stat().st_size
            path.unlink()
            self.bytes_held -= size
        except FileNotFoundError:
            pass

    def _entries(self):
        for sub in self.root.iterdir():
            if sub.is_dir():
                yield from sub.iterdir()

    def _scan_and_clean(self) -> int:
        total = 0
        for path in list(self._entries()):
            if path.name.startswith(TEMP_PREFIX):
                # A write a crash interrupted: never renamed, never an entry.
                path.unlink(missing_ok=True)
            elif path.name.endswith(SUFFIX):
                try:
                    total += path.stat().st_size
                except FileNotFoundError:
                    pass
        return total

    def _trim(self) -> None:
        """Removes the oldest entries until 90% of the bound is held."""
        entries = []
        for path in self._entries():
            if path.name.endswith(SUFFIX):
                try:
                    stat = path.stat()
                except FileNotFoundError:
                    continue
                entries.append((stat.st_mtime, stat.st_size, path))
        entries.sort()
        total = sum(size for _m, size, _p in entries)
        target = int(self.max_bytes * 0.9)
        for _mtime, size, path in entries:
            if total <= target:
                break
            path.unlink(missing_ok=True)
            total -= size
        self.bytes_held = total


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
