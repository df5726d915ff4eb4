"""Health says NOT_SERVING until a worker has booted and while none can, with
the first real cause (the exec error) in the reason (issue 29 case 7), at once
and with no request sent: `leanrpc serve --repl-cmd /nonexistent/repl`."""

from __future__ import annotations

import json
import shlex
import sys
import urllib.error
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from leanrpc.client import Client, ClientError
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc
from test_cli_logging import LoggedServer
from testkit import free_port


def _rest_health(port: int) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_nonexistent_repl_is_not_serving_from_the_start_with_the_exec_error(tmp_path):
    http = free_port()
    server = LoggedServer(tmp_path, "--repl-cmd", "/nonexistent/repl", "--http-port", str(http))
    try:
        # The first answers after "listening", before any request: not 200.
        with grpc.insecure_channel(server.address) as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=30
            )
            assert answer.status == health_pb2.HealthCheckResponse.NOT_SERVING
            info = pb_grpc.VerifierStub(channel).GetServerInfo(
                pb.GetServerInfoRequest(), timeout=30
            )
        assert not info.serving
        assert "No such file or directory" in info.not_serving_reason, info.not_serving_reason
        status, body = _rest_health(http)
        assert status == 503, body
        assert body["status"] == "unavailable"
        assert "first: " in body["detail"] and "No such file or directory" in body["detail"], body
        # Requests get one clear answer, and the reason stays the first cause.
        with Client(server.address, max_retries=0) as client:
            for _ in range(3):
                try:
                    client.verify_batch(["theorem h : 1 = 1 := rfl"])
                    raise AssertionError("a snippet was verified with no REPL")
                except ClientError as exc:
                    assert exc.code is grpc.StatusCode.UNAVAILABLE, exc
        status, body = _rest_health(http)
        assert status == 503 and "No such file or directory" in body["detail"], body
    finally:
        server.stop()


def test_a_repl_that_segfaults_at_boot_is_named_by_its_signal(tmp_path):
    # A real fault (a null read), not a self-sent signal: a REPL is PID 1 of its
    # sandbox, and PID 1 ignores signals it sends itself.
    http = free_port()
    command = shlex.join([sys.executable, "-c", "import ctypes; ctypes.string_at(0)"])
    server = LoggedServer(tmp_path, "--repl-cmd", command, "--http-port", str(http))
    try:
        status, body = _rest_health(http)
        with grpc.insecure_channel(server.address) as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=30
            )
    finally:
        server.stop()
    assert answer.status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert status == 503, body
    assert body["detail"].startswith("no REPL worker is up: ") and "first: " in body["detail"], body
    assert body["detail"].endswith("died (killed by SIGSEGV)"), body["detail"]
    boot = next(line for line in server.log() if " boot failed: " in line)
    assert boot.endswith("died (killed by SIGSEGV)"), boot


def test_a_working_repl_serves_once_booted(tmp_path):
    http = free_port()
    server = LoggedServer(tmp_path, "--http-port", str(http))
    try:
        status, body = _rest_health(http)
        assert status == 200, body
        with grpc.insecure_channel(server.address) as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=30
            )
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        server.stop()
