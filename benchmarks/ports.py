"""Loopback ports for servers a harness names before they bind: the one
`free_port`, shared by the benchmarks' targets, benchmarks/memproc.py and the
tests (tests/testkit.py re-exports it). Stdlib only: the peers' venv imports it.

Why not bind port 0 and close it: the kernel hands that port out again to
the next bind to port 0 or outbound connect, and a gRPC server or client
started between the pick and the server's own bind can take it (stop 57's
CI: the REST gateway's bind failed with EADDRINUSE). So a port comes from
outside ip_local_port_range, where nothing lands unless asked for by
number: a counter walks that span from an offset drawn from the pid (two
harnesses on one host seldom meet) and skips a port a test bind finds
taken. A host whose ephemeral range covers every port falls back to port 0.
"""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

__all__ = ["free_port"]


def _unassigned_ports() -> range:
    """Ports the kernel never picks on its own: below (or above)
    ip_local_port_range, the range every bind to port 0 and every outbound
    connect draws from. Empty where no span of 2,000 is left outside it."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return range(0)
    if low - 1024 >= 2000:
        return range(max(1024, low - 8000), low)
    if 65535 - high >= 2000:
        return range(high + 1, min(65536, high + 8001))
    return range(0)


_PORTS = _unassigned_ports()
_next_port = itertools.count(os.getpid() * 7919)


def free_port() -> int:
    """A loopback TCP port nobody holds now and the kernel will not hand out."""
    for _ in range(len(_PORTS)):
        port = _PORTS[next(_next_port) % len(_PORTS)]
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
