"""Health says NOT_SERVING once no REPL can boot, with the first real cause
(the exec error) in the reason (issue 29): `--repl-cmd /nonexistent/repl`."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from test_cli_logging import LoggedServer

from leanrpc.client import Client, ClientError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nonexistent_repl_health_reason_names_the_exec_error(tmp_path):
    http = _free_port()
    server = LoggedServer(tmp_path, "--repl-cmd", "/nonexistent/repl", "--http-port", str(http))
    try:
        with Client(server.address, max_retries=0) as client:
            for _ in range(3):  # each refused request tries a boot, until the breaker opens
                try:
                    client.verify_batch(["theorem h : 1 = 1 := rfl"])
                except ClientError:
                    pass
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{http}/health", timeout=30)
            raise AssertionError("/health answered 200 with no REPL that can boot")
        except urllib.error.HTTPError as exc:
            assert exc.code == 503
            body = json.loads(exc.read())
        assert body["status"] == "unavailable"
        assert body["detail"].startswith("3 consecutive REPL boot failures; first: ")
        assert "No such file or directory" in body["detail"], body
        with grpc.insecure_channel(server.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for _ in range(200):  # gRPC health follows the pool within its refresh period
                answer = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=30)
                if answer.status == health_pb2.HealthCheckResponse.NOT_SERVING:
                    break
                time.sleep(0.05)
        assert answer.status == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        server.stop()
