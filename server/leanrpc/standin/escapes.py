"""The sandbox-escape probes (``--@standin: escape=write,socket:HOST:PORT,...``): each is tried, reported, and never crashes.

A probe tries what a hostile proof would (write outside the scratch, open a
socket, spawn, read /etc/shadow, remount /, enter a user namespace) and
reports SUCCEEDED or how it was blocked; ``escape_messages`` places the
reports as info messages on the directive's line, so the sandbox tests read
them from an ordinary REPL answer. Split from faults.py (which parses the
directives and injects crashes, hangs and costs): this room only probes.

May import: the standard library only (and faults' Directives, for types).
"""

from __future__ import annotations

import os

from .faults import Directives


def escape_messages(d: Directives | None, tactic_mode: bool) -> list[dict]:
    """Info messages with what each ``escape`` probe saw, placed on its directive line."""
    if d is None:
        return []
    vals = d.all("escape")
    if not vals:
        return []
    texts = escapes(vals)
    line, text = next(((no, t) for no, t in d.lines if "escape" in t), (0, ""))
    if tactic_mode:
        pos = end = {"line": 0, "column": 0}
    else:
        pos = {"line": line, "column": 0}
        end = {"line": line, "column": len(text)}
    return [{"severity": "info", "pos": pos, "endPos": end, "data": t} for t in texts]


# -- escape attempts: each is reported, none may crash the process


def _blocked(e: BaseException) -> str:
    detail = getattr(e, "strerror", None) or str(e) or type(e).__name__
    return f"blocked ({type(e).__name__}: {detail})"


def _escape_write(arg: str | None = None) -> list[str]:
    # Outside any sandbox scratch: /etc and the host's shared /tmp ($HOME and
    # $TMPDIR are the scratch under a sandbox, where writing is allowed).
    targets = ["/etc/leanrpc-escape-test", f"/tmp/leanrpc-escape-test-{os.getpid()}"]
    out = []
    for path in targets:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, b"leanrpc stand-in escape test\n")
            finally:
                os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
            out.append(f"escape write {path}: SUCCEEDED")
        except OSError as e:
            out.append(f"escape write {path}: {_blocked(e)}")
    return out


def _escape_socket(arg: str | None = None) -> list[str]:
    """Connects to `arg` (HOST:PORT, default 127.0.0.1:9); tests pass a loopback listener."""
    import socket

    host, _, port = (arg or "127.0.0.1:9").rpartition(":")
    target = f"{host}:{port}"
    try:
        s = socket.create_connection((host, int(port)), timeout=1.0)
        s.close()
        return [f"escape socket {target}: SUCCEEDED"]
    except (OSError, ValueError) as e:
        return [f"escape socket {target}: {_blocked(e)}"]


def _escape_spawn(arg: str | None = None) -> list[str]:
    try:
        pid = os.posix_spawn("/bin/true", ["/bin/true"], dict(os.environ))
        os.waitpid(pid, 0)
        return ["escape spawn /bin/true: SUCCEEDED"]
    except OSError as e:
        return [f"escape spawn /bin/true: {_blocked(e)}"]


def _start_thread(arg: str | None = None) -> list[str]:
    """A control, not an escape (`all` leaves it out): threads must keep working
    under the sandbox's seccomp filter, which blocks only process creation."""
    import threading

    native_ids: list[int] = []
    try:
        t = threading.Thread(target=lambda: native_ids.append(threading.get_native_id()))
        t.start()
        t.join(10)
    except RuntimeError as e:  # "can't start new thread"
        return [f"escape thread threading.Thread: {_blocked(e)}"]
    if native_ids and native_ids[0] != threading.get_native_id():
        return ["escape thread threading.Thread: SUCCEEDED"]
    return ["escape thread threading.Thread: blocked (thread did not run)"]


def _escape_shadow(arg: str | None = None) -> list[str]:
    try:
        with open("/etc/shadow", "rb") as f:
            f.read(1)
        return ["escape shadow /etc/shadow: SUCCEEDED"]
    except OSError as e:
        return [f"escape shadow /etc/shadow: {_blocked(e)}"]


def _libc():
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _remount_root_writable(libc) -> int:
    import ctypes

    flags = os.statvfs("/").f_flag & ~1  # ST_* bits equal MS_* bits; drop ST_RDONLY
    ms_remount, ms_bind = 32, 4096
    if libc.mount(b"none", b"/", None, ctypes.c_ulong(ms_remount | ms_bind | flags), None) == 0:
        return 0
    return ctypes.get_errno()


def _escape_remount(arg: str | None = None) -> list[str]:
    # `mount -o remount,rw /` done as a *bind* remount that keeps every
    # per-mount flag except read-only: the least invasive form of the attempt,
    # and a no-op where / is already writable.
    try:
        err = _remount_root_writable(_libc())
        if err == 0:
            return ["escape remount /: SUCCEEDED"]
        return [f"escape remount /: {_blocked(OSError(err, os.strerror(err)))}"]
    except Exception as e:  # noqa: BLE001 - report, never crash
        return [f"escape remount /: {_blocked(e)}"]


def _escape_userns(arg: str | None = None) -> list[str]:
    """The same remount after unshare(user + mount namespaces), which any user may
    do on most kernels and which grants every capability inside the new
    namespace. Mount flags inherited from a more privileged namespace are
    locked, so this must fail too. The process stays in the new namespaces: it
    sees the same files with the same rights, so later requests are unaffected.
    """
    try:
        import ctypes

        libc = _libc()
        clone_newuser, clone_newns = 0x10000000, 0x00020000
        if libc.unshare(clone_newuser | clone_newns) != 0:
            err = ctypes.get_errno()
            return [f"escape userns /: {_blocked(OSError(err, os.strerror(err)))}"]
        err = _remount_root_writable(libc)
        if err == 0:
            return ["escape userns /: SUCCEEDED"]
        return [f"escape userns /: {_blocked(OSError(err, os.strerror(err)))}"]
    except Exception as e:  # noqa: BLE001 - report, never crash
        return [f"escape userns /: {_blocked(e)}"]


_ESCAPES = {
    "write": _escape_write,
    "socket": _escape_socket,
    "spawn": _escape_spawn,
    "shadow": _escape_shadow,
    "remount": _escape_remount,
    "userns": _escape_userns,
}
# Attempts that must succeed even under a sandbox.
_CONTROLS = {"thread": _start_thread}


def escapes(values: list[str]) -> list[str]:
    """Runs each attempt in `values` ("write,socket:127.0.0.1:PORT,all", ...)."""
    kinds: list[tuple[str, str | None]] = []
    for v in values:
        for item in v.split(","):
            k, colon, arg = item.strip().partition(":")
            k = k.lower()
            if k == "all":
                kinds.extend((name, None) for name in _ESCAPES)
            elif k:
                kinds.append((k, arg if colon else None))
    out: list[str] = []
    for k, arg in kinds:
        fn = _ESCAPES.get(k) or _CONTROLS.get(k)
        if fn is None:
            out.append(f"escape {k}: blocked (unknown escape kind)")
            continue
        try:
            out.extend(fn(arg))
        except Exception as e:  # noqa: BLE001 - never crash on an attempt
            out.append(f"escape {k}: {_blocked(e)}")
    return out
