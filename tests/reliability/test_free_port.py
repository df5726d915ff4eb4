"""free_port (benchmarks/ports.py, re-exported by testkit): a port for a door
the test names before it binds, drawn where the kernel never hands ports out
by itself (stop 57's CI failed on a port picked by binding port 0, which
something else took before the gateway bound it)."""

from __future__ import annotations

import itertools
import socket
from pathlib import Path

import pytest

from benchmarks import ports


def _ephemeral() -> tuple[int, int]:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def test_ports_come_from_outside_the_kernels_ephemeral_range_and_differ():
    if not ports._PORTS:
        pytest.skip("this host's ephemeral range leaves no span outside it; free_port uses port 0")
    low, high = _ephemeral()
    picked = [ports.free_port() for _ in range(50)]
    assert len(set(picked)) == 50
    assert all(not low <= port <= high and port >= 1024 for port in picked), picked


def test_a_port_someone_listens_on_is_skipped(monkeypatch):
    if not ports._PORTS:
        pytest.skip("this host's ephemeral range leaves no span outside it; free_port uses port 0")
    for start, taken in enumerate(ports._PORTS):  # a port free right now, to hold
        with socket.socket() as holder:
            try:
                holder.bind(("127.0.0.1", taken))
            except OSError:
                continue
            holder.listen()
            monkeypatch.setattr(ports, "_next_port", itertools.count(start))
            port = ports.free_port()  # the walk starts at the held port
        assert port != taken and port in ports._PORTS
        return
    pytest.fail("no free port in the span to test with")
