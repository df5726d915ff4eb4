"""The REST door, through a real server (issue 29): counted under the same
metric names as gRPC with door="rest", one log line per request."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest

from cli_support import GOOD
from leanrpc.client import Client
from test_cli_logging import LoggedServer
from testkit import free_port


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    http, metrics = free_port(), free_port()
    server = LoggedServer(
        tmp_path_factory.mktemp("rest"), "--http-port", str(http), "--metrics-port", str(metrics)
    )
    server.http, server.metrics = http, metrics
    yield server
    server.stop()


def _post(port: int, path: str, payload) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def _samples(port: int, family: str) -> dict[frozenset, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(family + "{"):
            labels, value = line[len(family) + 1 :].rsplit("} ", 1)
            out[
                frozenset(tuple(part.split("=", 1)) for part in labels.replace('"', "").split(","))
            ] = float(value)
    return out


def test_rest_and_grpc_counted_under_the_same_names_with_a_door_label(served):
    bad = "theorem r (x : Nat) : x = x + 1 := by\n  exact Nat.nonexistent_lemma x\n"
    body = _post(
        served.http,
        "/api/check",
        {
            "snippets": [
                {"id": "a", "code": GOOD.replace("theorem t", "theorem ra")},
                {"id": "b", "code": bad},
            ]
        },
    )
    assert len(body["results"]) == 2
    with Client(served.address) as client:
        client.verify_batch([GOOD.replace("theorem t", "theorem rg")])
    rpcs = _samples(served.metrics, "leanrpc_rpcs_total")
    assert rpcs[frozenset({("method", "/api/check"), ("code", "200"), ("door", "rest")})] == 1
    assert (
        rpcs[
            frozenset({("method", "/leanrpc.v1.Verifier/Verify"), ("code", "OK"), ("door", "grpc")})
        ]
        == 1
    )
    snippets = _samples(served.metrics, "leanrpc_snippets_total")
    assert snippets[frozenset({("status", "VALID"), ("door", "rest")})] == 1
    assert snippets[frozenset({("status", "INVALID"), ("door", "rest")})] == 1
    assert snippets[frozenset({("status", "VALID"), ("door", "grpc")})] == 1
    phases = _samples(served.metrics, "leanrpc_snippet_phase_seconds_count")
    assert phases[frozenset({("phase", "total"), ("door", "rest")})] == 2
    assert phases[frozenset({("phase", "total"), ("door", "grpc")})] == 1
    line = served.wait_for("POST /api/check from ")
    assert (
        "INFO leanrpc.requests: POST /api/check from peer:ipv4:127.0.0.1: 2 snippets (INVALID 1, VALID 1) 200 in "
        in line
    ), line


def test_grpc_bytes_on_the_rest_port_are_one_rate_limited_line(served):
    for _ in range(5):
        with socket.create_connection(("127.0.0.1", served.http)) as s:
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            try:
                s.recv(100)
            except OSError:
                pass
    served.wait_for("not HTTP/1.1 on the REST port")
    with urllib.request.urlopen(f"http://127.0.0.1:{served.http}/health", timeout=30) as response:
        assert response.status == 200  # answered after the junk: every junk request was handled
    log = served.log()
    assert "Traceback" not in "\n".join(log)
    junk = [line for line in log if "REST port" in line]
    assert len(junk) == 1, junk
    assert (
        "WARNING aiohttp.server: not HTTP/1.1 on the REST port from 127.0.0.1 (BadHttpMessage: "
        in junk[0]
    ), junk
