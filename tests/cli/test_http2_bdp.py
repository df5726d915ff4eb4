"""`[server] http2_bdp_probe`: the served gRPC port probes HTTP/2 BDP only when asked to.

gRPC's own trace (`GRPC_TRACE=bdp_estimator`) of a real `leanrpc serve` says whether its
transport ran the estimator: each probe is a PING the peer must answer, and the estimator
starts one on the first burst of data received. A request large enough to be such a burst
(a health check naming a 200 KB service) is sent from a channel that probes nothing itself,
so every estimator line on the server's stderr is the server's own.
"""

from __future__ import annotations

import asyncio
import subprocess

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from leanrpc.client.aio import channel_options
from tests.cli.cli_support import LEANRPC, clean_env


def _estimator_lines(*env: tuple[str, str]) -> list[str]:
    environ = clean_env()
    environ.update({"GRPC_TRACE": "bdp_estimator", "GRPC_VERBOSITY": "debug", **dict(env)})
    process = subprocess.Popen(
        [LEANRPC, "serve", "--port", "0", "--workers", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
        start_new_session=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("leanrpc listening on "), line
        address = line.split()[-1]
        with grpc.insecure_channel(address, options=[("grpc.http2.bdp_probe", 0)]) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for _ in range(5):
                try:
                    stub.Check(health_pb2.HealthCheckRequest(service="x" * 200_000), timeout=30)
                except grpc.RpcError as error:
                    assert error.code() is grpc.StatusCode.NOT_FOUND
    finally:
        process.terminate()
        _out, err = process.communicate(timeout=60)
    return [line for line in err.splitlines() if "bdp[" in line]


def test_the_server_probes_no_bdp_by_default():
    assert _estimator_lines() == []


def test_the_server_probes_bdp_when_configured():
    lines = _estimator_lines(("LEANRPC_SERVER__HTTP2_BDP_PROBE", "true"))
    assert any(":start " in line for line in lines), lines


def test_the_python_client_asks_for_no_bdp_probe():
    options = dict(channel_options(64))
    assert options["grpc.http2.bdp_probe"] == 0
    assert options["grpc.max_send_message_length"] == 64 * 2**20


def test_a_far_client_asks_for_bdp_probing(monkeypatch):
    """`http2_bdp_probe=True` reaches the channel the client opens (gRPC's default
    then: many small messages over a long link grow the window); the default does not."""
    from leanrpc.client import aio

    opened = []
    real = grpc.aio.insecure_channel

    def capture(address, options=None):
        opened.append(dict(options))
        return real(address, options=options)

    monkeypatch.setattr(aio.grpc.aio, "insecure_channel", capture)

    async def open_and_close(**kwargs) -> int:
        client = aio.AsyncClient("127.0.0.1:1", **kwargs)
        await client.close()
        return opened[-1]["grpc.http2.bdp_probe"]

    assert asyncio.run(open_and_close(http2_bdp_probe=True)) == 1
    assert asyncio.run(open_and_close()) == 0
