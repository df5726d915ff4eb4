"""The gateway against careless and hostile peers: disable_cache honoured,
slow headers and bodies cut off, a per-peer connection cap, deep JSON a 422
(issue 26 item 6). Real sockets on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time

import aiohttp

from leanrpc.app import create_server
from leanrpc.gateway import start_gateway
from testkit import loopback_config, wait_until

HEADER = "import Mathlib\n\n"
GIVE_UP_S = 60  # far past every configured timeout: reaching it means the server never closed


@contextlib.asynccontextmanager
async def gateway(cache: bool = False, **settings):
    config = loopback_config(1)
    config.cache.enabled = cache
    for key, value in settings.items():
        setattr(config.gateway, key, value)
    app = await create_server(config)
    served = await start_gateway(app.verify, config, port=0)
    try:
        yield app, served.port, served
    finally:
        await served.stop(1.0)
        await app.stop(2.0)


async def _post(port: int, path: str, body) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"http://127.0.0.1:{port}{path}", json=body) as response:
            return response.status, await response.json()


def _trickle(port: int, head: bytes, trickle: bytes, interval: float) -> tuple[bytes, int]:
    """Sends `head`, then `trickle` one byte per `interval` until the server
    closes (or GIVE_UP_S). Returns (what the server sent, bytes trickled)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(interval)
    received, sent = b"", 0
    end = time.monotonic() + GIVE_UP_S
    try:
        sock.sendall(head)
        while time.monotonic() < end and sent < len(trickle):
            try:
                chunk = sock.recv(4096)
                if not chunk:
                    return received, sent  # closed by the server
                received += chunk
            except socket.timeout:
                pass
            except ConnectionResetError:
                return received, sent  # closed by the server (with data unread)
            try:
                sock.send(trickle[sent : sent + 1])
                sent += 1
            except (BrokenPipeError, ConnectionResetError):
                return received, sent
        return received, -1  # never closed
    finally:
        sock.close()


async def test_verify_with_disable_cache_elaborates_every_time():
    async with gateway(cache=True) as (app, port, _served):
        body = {
            "codes": [{"custom_id": "a", "proof": HEADER + "theorem a : 1 + 1 = 2 := by rfl"}],
            "timeout": 20,
        }
        for _ in range(2):
            status, answer = await _post(port, "/verify", {**body, "disable_cache": True})
            assert (
                status == 200
                and answer["results"][0]["leanrpc"]["reuse"].get("cache_source", "") == ""
            )
        assert app.pool.stats.jobs_finished == 2
        # Without it, the same snippet is the cache's (memory) answer.
        await _post(port, "/verify", body)
        status, answer = await _post(port, "/verify", body)
        assert answer["results"][0]["leanrpc"]["reuse"].get("cache_source", "") == "memory"
        assert app.pool.stats.jobs_finished == 3


async def test_slow_headers_are_cut_off_at_the_header_timeout():
    async with gateway(header_timeout_s=1.0, max_connections_per_peer=0) as (_app, port, _served):
        head = b"POST /api/check HTTP/1.1\r\nHost: x\r\n"
        trickle = b"X-Slow: " + b"a" * 200  # never finishes the headers
        results = await asyncio.gather(
            *(asyncio.to_thread(_trickle, port, head, trickle, 0.25) for _ in range(20))
        )
        # Every connection was closed by the server, well before the trickle ended.
        assert all(sent != -1 and sent < len(trickle) for _received, sent in results), results


async def test_a_body_at_one_byte_a_second_gets_408_and_a_close():
    async with gateway(body_timeout_s=2.0) as (_app, port, _served):
        payload = json.dumps(
            {"snippets": [{"id": "a", "code": "theorem a : True := trivial"}]}
        ).encode()
        head = (
            b"POST /api/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(payload)
        )
        received, sent = await asyncio.to_thread(_trickle, port, head, payload, 1.0)
        assert sent != -1 and sent < len(payload)
        assert received.startswith(b"HTTP/1.1 408"), received[:200]


async def test_a_peer_over_its_connection_cap_is_refused_and_others_still_served():
    async with gateway(max_connections_per_peer=3) as (_app, port, served):
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            answer = await asyncio.wait_for(reader.read(), 30)  # up to EOF: it is closed
            writer.close()
            assert answer.startswith(b"HTTP/1.1 429")
            # A held connection still works.
            reader, writer = held[0]
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await asyncio.wait_for(reader.readline(), 30)).startswith(b"HTTP/1.1 200")
        finally:
            for _reader, writer in held:
                writer.close()
        # Closed connections free their places.
        await wait_until(
            lambda: not served.open_connections, 30, "the closed connections to be counted out"
        )
        status, _ = await _post(
            port, "/api/check", {"snippets": [{"id": "a", "code": "theorem a : True := trivial"}]}
        )
        assert status == 200


async def test_slow_peers_hold_their_cap_until_the_header_timeout_frees_it():
    """Slow clients at the cap: three connections trickling headers fill the
    peer's places (a fourth is 429 at once), the header timeout closes them,
    their places are counted out, and the same peer is served again."""
    async with gateway(header_timeout_s=1.5, max_connections_per_peer=3) as (_app, port, served):
        head = b"POST /api/check HTTP/1.1\r\nHost: x\r\n"
        trickle = b"X-Slow: " + b"a" * 200  # never finishes the headers
        slow = [
            asyncio.ensure_future(asyncio.to_thread(_trickle, port, head, trickle, 0.25))
            for _ in range(3)
        ]
        await wait_until(
            lambda: served.open_connections.get("127.0.0.1", 0) == 3, 30, "three slow peers"
        )
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            answer = await asyncio.wait_for(reader.read(), 30)  # up to EOF: it is closed
        finally:
            writer.close()
        assert answer.startswith(b"HTTP/1.1 429"), answer[:200]
        results = await asyncio.gather(*slow)
        # Each slow connection was closed by the server before its trickle ended.
        assert all(sent != -1 and sent < len(trickle) for _received, sent in results), results
        await wait_until(lambda: not served.open_connections, 30, "the slow peers counted out")
        status, _ = await _post(
            port, "/api/check", {"snippets": [{"id": "a", "code": "theorem a : True := trivial"}]}
        )
        assert status == 200


def test_the_peer_cap_counts_and_refuses_without_aiohttp_internals():
    """The cap is a plain asyncio protocol factory around aiohttp's public
    `web.Server`: over the cap the connection gets a 429 and a close and never
    reaches aiohttp's handler; a closed connection frees its place."""
    from leanrpc.gateway.listener import PeerCap

    made = []

    class Handler(asyncio.Protocol):
        def connection_made(self, transport):
            made.append(self)
            self.data = b""

        def data_received(self, data):
            self.data += data

    class Transport:
        def __init__(self):
            self.written, self.closed = b"", False

        def get_extra_info(self, name):
            return ("10.0.0.7", 5555) if name == "peername" else None

        def write(self, data):
            self.written += data

        def close(self):
            self.closed = True

    cap = PeerCap(Handler, 2)
    conns = [(cap(), Transport()) for _ in range(3)]
    for protocol, transport in conns:
        protocol.connection_made(transport)
    assert cap.open == {"10.0.0.7": 3} and len(made) == 2
    refused_protocol, refused = conns[2]
    assert refused.written.startswith(b"HTTP/1.1 429") and refused.closed
    refused_protocol.data_received(b"GET / HTTP/1.1\r\n\r\n")  # dropped, no handler
    conns[0][0].data_received(b"GET")
    assert made[0].data == b"GET"
    refused_protocol.connection_lost(None)
    conns[0][0].connection_lost(None)
    assert cap.open == {"10.0.0.7": 1}
    again = cap()
    again.connection_made(Transport())
    assert len(made) == 3 and cap.open == {"10.0.0.7": 2}


async def test_json_nested_a_thousand_deep_is_a_422_without_a_traceback(caplog):
    async with gateway() as (_app, port, _served):
        with caplog.at_level(logging.DEBUG):
            for depth in (1000, 5000, 100_000):
                nested = "[" * depth + "]" * depth
                body = (
                    '{"x": %s, "snippets": [{"id": "a", "code": "theorem a : True := trivial"}]}'
                    % nested
                )
                async with aiohttp.ClientSession() as session:
                    async with session.post(
                        f"http://127.0.0.1:{port}/api/check",
                        data=body,
                        headers={"Content-Type": "application/json"},
                    ) as response:
                        assert response.status == 422, (depth, await response.text())
                        assert "nested too deeply" in await response.text()
        assert "Traceback" not in caplog.text and "RecursionError" not in caplog.text
