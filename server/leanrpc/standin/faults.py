"""Directives (``--@standin: NAME[=VALUE]`` lines), the faults they inject, and cost primitives.

A directive line is a Lean line comment, so the same text is harmless when it
reaches a real REPL. Directive lines never count in replay keys. ``apply``
runs a request's faults before it is answered; the sandbox-escape probes
live in escapes.py. ``burn``/``grow`` are the CPU and memory
primitives that ``costs.py`` charges with; ``begin``/``settle`` open and pay a
request's CPU ledger, so that a request costs what it is charged in all, its
own parsing and elaboration included.

May import: the standard library only.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time

__all__ = ["scan", "apply", "begin", "settle", "burn", "grow", "Directives"]

_LINE = re.compile(r"^[ \t]*--@standin:?[ \t]*(.*?)[ \t]*$")

# Memory handed out by `grow` and `--base-memory-mb`: kept for the process
# lifetime, like a REPL's environments.
_HELD: list = []


class Directives:
    __slots__ = ("items", "lines")

    def __init__(self):
        self.items: list[tuple[str, str | None]] = []
        self.lines: list[tuple[int, str]] = []  # (1-based line, text) of each directive line

    def get(self, name: str):
        for k, v in self.items:
            if k == name:
                return v if v is not None else ""
        return None

    def all(self, name: str) -> list[str]:
        return [v or "" for k, v in self.items if k == name]

    def __bool__(self):
        return bool(self.items)


def scan(text: str) -> tuple[Directives | None, str, list[int] | None]:
    """Finds directive lines.

    Returns (directives or None, the text without directive lines, and the
    line map: ``line_map[k]`` is the original line number of line ``k + 1``
    of the stripped text; None when no line was removed).
    """
    if "--@standin" not in text:
        return None, text, None
    d = Directives()
    kept: list[str] = []
    line_map: list[int] = []
    for no, line in enumerate(text.split("\n"), 1):
        m = _LINE.match(line)
        if m is None:
            kept.append(line)
            line_map.append(no)
            continue
        d.lines.append((no, line))
        for item in m.group(1).split():
            name, eq, value = item.partition("=")
            d.items.append((name.strip().lower(), value if eq else None))
    return d, "\n".join(kept), line_map


def apply(d: Directives, stdout) -> bool:
    """Runs the faults `d` asks for, in a fixed order, before the request is
    answered. Returns whether the answer must be cut short (``partial``).
    `stdout` is the process's output stream (``garbage`` and ``crash`` write to it)."""
    n = d.get("stderr")
    if n is not None:
        flood_stderr(int(parse_seconds(n, 65536)))
    if d.get("panic") is not None:
        panic()
    g = d.get("garbage")
    if g is not None:
        garbage(g or None, stdout)
    g = d.get("grow")
    if g is not None:
        grow(parse_seconds(g, 0))
    b = d.get("burn")
    if b is not None:
        burn(parse_seconds(b, 0))
    c = d.get("crash")
    h = d.get("hang")
    if c is not None or h is not None:
        settle()  # what was charged is burnt before the process dies or hangs
    if c is not None:
        crash(c, stdout)
    if h is not None:
        hang(h or None)
    return d.get("partial") is not None


# --------------------------------------------------------------------------
# costs


# The open request's CPU ledger: (process CPU time when it was read, seconds
# charged since). Set by `begin`, paid by `settle`; None outside a request.
_ledger: list[float] | None = None
# The CPU clock charges are paid on: the process's (the stand-in runs one
# thread); a test in a process with other threads reads its own thread's.
_cpu_clock = time.process_time


def begin() -> None:
    """A request was read: what it is charged from now on is its total CPU.

    A real REPL's time for a command is all of its CPU: parsing the JSON and
    the text included. The stand-in's own Python (its lexer and elaborator,
    about 3.5 ms per miniF2F body) would otherwise come on top of every
    charge, so a target could never reach the workload's ideal throughput.
    Between `begin` and `settle` charges are owed, and `settle` burns until
    the request's CPU reaches what it owes."""
    global _ledger
    _ledger = [_cpu_clock(), 0.0]


def settle() -> None:
    """Burns until the open request's CPU since `begin` reaches its charges; closes it."""
    global _ledger
    ledger, _ledger = _ledger, None
    if ledger is not None and ledger[1] > 0:
        _spin_until(ledger[0] + ledger[1])


def burn(seconds: float) -> None:
    """Charges ``seconds`` of this process's CPU time (a busy loop, never sleeps).

    Inside a request (`begin`) the charge is owed and paid by `settle`, so
    the request costs max(its charges, its own work) in all; outside one the
    CPU is burnt at once."""
    if seconds <= 0:
        return
    if _ledger is not None:
        _ledger[1] += seconds
        return
    _spin_until(_cpu_clock() + seconds)


def _spin_until(deadline: float) -> None:
    clock = _cpu_clock
    x = 0
    while clock() < deadline:
        for i in range(2000):
            x ^= i * i


def grow(mb: float) -> None:
    """Allocates ``mb`` MiB, touches every page and keeps it forever."""
    n = int(mb * 1048576)
    if n <= 0:
        return
    block = bytearray(n)
    block[::4096] = b"\x01" * len(range(0, n, 4096))
    _HELD.append(block)


def parse_seconds(value: str | None, default: float = 0.0) -> float:
    try:
        return float(value) if value not in (None, "") else default
    except ValueError:
        return default


# --------------------------------------------------------------------------
# faults


def _no_core() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):  # pragma: no cover
        pass


def crash(mode: str, stdout) -> None:
    """Dies mid-request, writing nothing more on stdout."""
    mode = mode or "exit"
    if mode == "abort":
        _no_core()
        sys.stderr.write("Stack overflow detected. Aborting.\n")
        sys.stderr.flush()
        signal.signal(signal.SIGABRT, signal.SIG_DFL)
        os.abort()
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "segv":
        _no_core()
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        # A real fault, not kill(2), as a crashing Lean has; the sandbox runs
        # the REPL as PID 2 under an init, so kill and abort act as well.
        import ctypes

        ctypes.string_at(0)
    # exit (also the fallback for unknown modes): like a Lean uncaught exception
    try:
        stdout.flush()
    except OSError:  # pragma: no cover
        pass
    sys.stderr.write("uncaught exception: leanrpc stand-in: crash directive\n")
    sys.stderr.flush()
    os._exit(1)


def hang(mode: str | None) -> None:
    if mode == "busy":
        while True:
            pass
    while True:
        time.sleep(3600)


def flood_stderr(nbytes: int) -> None:
    line = b"leanrpc stand-in stderr flood: " + b"x" * 96 + b"\n"
    chunk = line * (65536 // len(line) + 1)
    out = sys.stderr.buffer
    left = nbytes
    while left > 0:
        piece = chunk[:left] if left < len(chunk) else chunk
        out.write(piece)
        left -= len(piece)
    sys.stderr.flush()


def panic() -> None:
    sys.stderr.write(
        "PANIC at LeanRpc.StandIn.panicDirective LeanRpc.StandIn:1:0: panic directive (leanrpc stand-in)\n"
    )
    sys.stderr.flush()


def garbage(mode: str | None, stdout) -> None:
    if mode == "inline":
        data = b"@@ leanrpc stand-in garbage, not JSON @@ "
    elif mode == "binary":
        data = b"\xff\xfe\x00garbage\xc3(\n\n"
    else:
        data = b"@@ leanrpc stand-in garbage: {not json]] @@\n\n"
    stdout.write(data)
    stdout.flush()
