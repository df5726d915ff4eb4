"""End to end over a real socket: gRPC server, pool, stand-in REPL processes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import psutil
import pytest

from leanrpc.app import create_server
from leanrpc.client import AsyncClient, ClientError
from leanrpc.config import Config

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
HEADERS = ["import Mathlib", "import Mathlib.Tactic", "import Aesop"]


async def _start(workers=2, **pool):
    config = Config()
    config.server.port = 0
    config.pool.workers = workers
    config.pool.default_timeout_s = 20
    for key, value in pool.items():
        section, _, name = key.partition("__")
        setattr(getattr(config, section), name, value)
    app = await create_server(config)
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    return app, client


async def _stop(app, client):
    await client.close()
    children = [w.pid for w in app.pool.workers if w.pid]
    await app.stop(2.0)
    for pid in children:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def _snippet(i: int) -> str:
    header = HEADERS[i % 3]
    if i % 5 == 0:
        return f"{header}\n\ntheorem t{i} (x : Nat) : x + {i} = x + {i} := by\n  sorry\n"
    return f"{header}\n\ntheorem t{i} (x : Nat) : x + {i} = x + {i} := by rfl\n"


async def test_thousand_snippets_three_headers_two_workers():
    app, client = await _start(workers=2)
    try:
        codes = [_snippet(i) for i in range(1000)]
        results = await client.verify_batch([(f"s{i}", c) for i, c in enumerate(codes[:500])])
        assert [r.id for r in results] == [f"s{i}" for i in range(500)]
        streamed = await client.verify(
            [(f"q{i}", c) for i, c in enumerate(codes[500:], 500)], window=64
        )
        assert [r.id for r in streamed] == [f"q{i}" for i in range(500, 1000)]
        for i, r in enumerate(results + streamed):
            assert r.status == ("SORRY" if i % 5 == 0 else "VALID"), (i, r)
            assert r.verifier == "stand-in"
        # Header reuse bound: a worker holds several headers (pool.max_headers_per_worker
        # >= 3 here), so without restarts or switches each of the 2 workers loads each
        # of the 3 headers at most once (whether the router waits for a holder or
        # spreads to the idle worker depends on timing); loads stay far below one per snippet.
        assert app.config.pool.max_headers_per_worker >= 3
        loads = app.pool.stats.header_loads
        assert (
            3 <= loads <= 2 * 3 + app.pool.stats.header_switches + app.pool.stats.restarts.total()
        )
        assert app.pool.stats.header_hits >= 1000 - loads
        assert app.pool.stats.jobs_submitted == 1000 == app.pool.stats.jobs_finished
    finally:
        await _stop(app, client)


async def test_kimina_messages_map_to_user_lines():
    app, client = await _start(workers=2)
    try:
        inputs = sorted((SHARED / "fixtures/kimina/match/input").glob("goedel-*.lean"))[:12]
        checked = 0
        for path in inputs:
            recorded = json.loads(
                (SHARED / "fixtures/kimina/match/output" / (path.stem + ".json")).read_text()
            )
            response = recorded["results"][0].get("response")
            if not response:
                continue
            code = path.read_text()
            [result] = await client.verify_batch([code])
            lines = code.split("\n")
            # Kimina's body starts at the first non-blank line after imports.
            first = next(
                i for i, line in enumerate(lines) if line.strip() and not line.startswith("import")
            )
            expected = sorted(
                (m["pos"]["line"] + first, m["pos"]["column"], m["data"])
                for m in response.get("messages", [])
            )
            got = sorted((m.line, m.column, m.text) for m in result.messages)
            assert got == expected, path.name
            checked += 1
        assert checked >= 10
    finally:
        await _stop(app, client)


async def test_bad_input_gets_clear_status_and_server_keeps_serving():
    app, client = await _start(workers=1)
    try:
        with pytest.raises(ClientError) as info:
            await client.verify_batch([])
        assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(ClientError) as info:
            await client.verify_batch(["   "])
        assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(ClientError) as info:
            await client.verify_batch(["theorem x : True := trivial\n" + "-- pad\n" * 200_000])
        assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(ClientError) as info:
            await client.verify_batch(["example : True := trivial"] * 10_001)
        assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
        [ok] = await client.verify_batch(["example : True := trivial"])
        assert ok.status == "VALID"
    finally:
        await _stop(app, client)


async def test_header_failure_is_rejected_not_invalid():
    app, client = await _start(workers=1)
    try:
        [r] = await client.verify_batch(["import NoSuchModule\n\ntheorem a : True := trivial\n"])
        assert r.status == "REJECTED" and "header" in r.error
        [ok] = await client.verify_batch(["import Mathlib\n\ntheorem a : True := trivial\n"])
        assert ok.status == "VALID"
    finally:
        await _stop(app, client)


async def test_faults_timeout_crash_oom_garbage():
    app, client = await _start(workers=2, limits__max_worker_rss_mb=400)
    try:
        base = "import Mathlib\n\n"
        # Only the hang is meant to time out; the others must answer whatever the
        # machine's speed (an OOM balloon still growing at 2 s on a loaded machine is
        # rightly TIMEOUT: the memory watch, not the clock, must end it).
        hung, others = await asyncio.gather(
            client.verify_batch(
                [("hang", base + "theorem a : True := trivial\n--@standin: hang\n")], timeout_s=2.0
            ),
            client.verify_batch(
                [
                    ("crash", base + "theorem a : True := trivial\n--@standin: crash=kill\n"),
                    (
                        "oom",
                        base
                        + "theorem a : True := trivial\n--@standin: grow=800\n--@standin: hang\n",
                    ),
                    ("garbage", base + "theorem a : True := trivial\n--@standin: garbage=inline\n"),
                    ("fine", base + "theorem a : True := trivial\n"),
                ],
                timeout_s=60.0,
            ),
        )
        results = [*hung, *others]
        status = {r.id: r.status for r in results}
        assert status == {
            "hang": "TIMEOUT",
            "crash": "CRASH",
            "oom": "OUT_OF_MEMORY",
            "garbage": "CRASH",
            "fine": "VALID",
        }
        by_id = {r.id: r for r in results}
        assert by_id["crash"].attempts == 2  # retried once, then answered
        assert by_id["hang"].time_total_s < 2.0 + 1.0 + by_id["hang"].time_queue_s + 1.0
        [again] = await client.verify_batch([base + "theorem b : True := trivial\n"])
        assert again.status == "VALID"
    finally:
        await _stop(app, client)


async def test_stream_cancel_and_health():
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from leanrpc.v1 import verifier_pb2 as pb
    from leanrpc.v1 import verifier_pb2_grpc

    app, client = await _start(workers=1)
    try:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest(service="leanrpc.v1.Verifier"))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stub = verifier_pb2_grpc.VerifierStub(channel)
        call = stub.VerifyStream()
        await call.write(
            pb.VerifyStreamRequest(
                snippet=pb.Snippet(
                    id="slow", code="import Mathlib\nexample : True := trivial\n--@standin: hang"
                )
            )
        )
        await call.write(pb.VerifyStreamRequest(cancel_id="slow"))
        await call.write(
            pb.VerifyStreamRequest(
                snippet=pb.Snippet(id="ok", code="import Mathlib\nexample : True := trivial")
            )
        )
        await call.done_writing()
        got = {}
        async for message in call:
            got[message.result.id] = message.result.status
        assert got == {"slow": pb.STATUS_CANCELLED, "ok": pb.STATUS_VALID}
        await channel.close()
    finally:
        await _stop(app, client)
