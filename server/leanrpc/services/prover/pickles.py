"""Proof states as bytes the server holds: pickled on one worker, unpickled on another.

Owns: whether a worker's REPL can pickle proof states (`can_pickle`: the
`[prover] pickle` setting, else the Lean version its identity probe learnt;
`pickleTo`/`unpickleProofStateFrom` arrived in REPL v4.3.0), where a worker's
private scratch is (`Scratch`: as the REPL sees it, as the server reaches it)
and the two exchanges `pickle_state` / `unpickle_state`. May import: errors, results,
repl, worker (states only).

The bytes never stay in a worker's scratch. The server reads them back right
after the REPL wrote them and removes the file; to unpickle, it writes them
into the *target* worker's own scratch and removes the file after the answer.
No directory is shared by two workers, so code one snippet runs (`#eval`) on
one worker cannot touch the pickles another worker reads. Under the unshare
sandbox the scratch is the worker's private tmpfs, reached from the server
through `/proc/<REPL pid>/root`; without the sandbox it is a 0700 directory
the server makes for that worker alone (a worker running as the server's uid
is not isolated from anything then; docs/SECURITY.md).

The REPL chooses what lies at the path it answers about, so the event loop
never touches it: every open, read, write and unlink runs in a thread
(`asyncio.to_thread`), the pickle is opened O_NONBLOCK|O_NOFOLLOW (a FIFO with
no writer does not block the open) and read only when fstat says it is a
regular file (a FIFO, socket or device is "no pickle").
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import stat
import tempfile

import psutil

from ... import repl
from ...results import lean_version_tuple

__all__ = ["FIRST_PICKLING_VERSION", "Scratch", "can_pickle", "pickle_state", "unpickle_state"]

# The first REPL tag with proof-state pickling (shared/REPL-PROTOCOL.md §9).
FIRST_PICKLING_VERSION = (4, 3, 0)


def can_pickle(setting: str, lean_version: str) -> bool:
    """`setting` is "on", "off" or "auto" (by `lean_version`; unknown: no)."""
    if setting in ("on", "off"):
        return setting == "on"
    version = lean_version_tuple(lean_version)
    return version is not None and version >= FIRST_PICKLING_VERSION


class Scratch:
    """Where each worker may write: (path the REPL is given, path the server opens)."""

    def __init__(self, sandbox_scratch: str | None) -> None:
        # The sandbox's scratch mountpoint (inside each worker's own root), or
        # None when workers run without the unshare sandbox.
        self._sandbox = sandbox_scratch
        self._private: dict[str, str] = {}  # worker name -> directory the server made

    def paths(self, worker) -> tuple[str, str, str]:
        """(path the REPL is given, a directory the server trusts, the path
        below it). Nothing below the trusted directory is followed if it is
        a symlink (`_open_beneath`): under the sandbox the worker owns what
        is in its root, and a symlink there must not lead the server (root)
        to read or create a file of its own choosing."""
        name = f"leanrpc-state-{secrets.token_hex(8)}.olean"
        if self._sandbox:
            inside = os.path.join(self._sandbox, name)
            return inside, f"/proc/{_repl_pid(worker)}/root", inside.lstrip("/")
        folder = self._private.get(worker.name)
        if folder is None or not os.path.isdir(folder):
            folder = self._private[worker.name] = tempfile.mkdtemp(
                prefix=f"leanrpc-{worker.name}-states-"
            )
        return os.path.join(folder, name), folder, name

    def forget(self, worker_name: str) -> None:
        folder = self._private.pop(worker_name, None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        for name in list(self._private):
            self.forget(name)


def _repl_pid(worker) -> int:
    """The process whose root holds the scratch: the monitor's child (enter.py)."""
    try:
        children = psutil.Process(worker.pid).children()
    except (psutil.Error, TypeError):
        children = []
    return children[0].pid if children else worker.pid


def _folder_beneath(base: str, folders: list[str]) -> int:
    """An fd of the folder `base/folders...`, walking every component with
    O_NOFOLLOW: a symlink anywhere below `base` is an OSError.
    (Python has no openat2(RESOLVE_IN_ROOT); this walk is its safe subset.)"""
    directory = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for folder in folders:
            if folder in ("", ".", ".."):
                raise OSError(f"unexpected path component {folder!r}")
            inner = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=directory)
            os.close(directory)
            directory = inner
    except BaseException:
        os.close(directory)
        raise
    return directory


def _open_beneath(base: str, relative: str, flags: int, mode: int = 0o600) -> int:
    """An fd of the file `relative` below `base`, no symlink followed on the way or at the end."""
    *folders, name = relative.split("/")
    directory = _folder_beneath(base, folders)
    try:
        return os.open(name, flags | os.O_NOFOLLOW, mode, dir_fd=directory)
    finally:
        os.close(directory)


def _unlink_beneath(base: str, relative: str) -> None:
    *folders, name = relative.split("/")
    try:
        directory = _folder_beneath(base, folders)
    except OSError:
        return
    try:
        os.unlink(name, dir_fd=directory)
    except OSError:
        pass
    finally:
        os.close(directory)


def _read_regular(base: str, relative: str, max_bytes: int) -> bytes | None:
    """The bytes of the regular file `relative` below `base` (at most
    `max_bytes` + 1), or None: missing, a symlink, or not a regular file.
    Opened non-blocking, so a FIFO there never waits for a writer."""
    try:
        fd = _open_beneath(base, relative, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return f.read(max_bytes + 1)


def _write_new(base: str, relative: str, data: bytes) -> None:
    fd = _open_beneath(base, relative, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NONBLOCK, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


async def pickle_state(
    worker, scratch: Scratch, proof_state: int, timeout: float, max_bytes: int
) -> tuple[bytes, list[str]] | None:
    """The pickle of REPL proof state `proof_state` and its goals, or None
    when the REPL refused or the file is unreadable, not a regular file, or
    over `max_bytes`. WorkerError (timeout, crash: a pickle I/O failure kills
    the REPL) propagates."""
    inside, base, relative = scratch.paths(worker)
    try:
        response = await worker.request(repl.pickle_to(proof_state, inside), timeout)
        if response.proof_state is None:
            return None
        data = await asyncio.to_thread(_read_regular, base, relative, max_bytes)
        if not data or len(data) > max_bytes:
            return None
        return data, list(response.goals or [])
    finally:
        await asyncio.to_thread(_unlink_beneath, base, relative)


async def unpickle_state(
    worker, scratch: Scratch, data: bytes, base_env: int, timeout: float
) -> repl.Response:
    """Writes `data` into `worker`'s own scratch and unpickles it on `base_env`.

    Returns the REPL's answer (a new proof state, or a message); WorkerError
    propagates (a bad pickle can kill the REPL). OSError when the scratch
    cannot be written."""
    inside, base, relative = scratch.paths(worker)
    try:
        await asyncio.to_thread(_write_new, base, relative, data)
        return await worker.request(repl.unpickle_from(inside, base_env), timeout)
    finally:
        await asyncio.to_thread(_unlink_beneath, base, relative)
