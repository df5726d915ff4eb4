"""Every accepted snippet gets exactly one answer, also when the stream ends
badly: an invalid message mid-stream, or the server shutting down."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from leanrpc.app import create_server
from leanrpc.v1 import verifier_pb2 as pb
from testkit import descendants
from verify_support import running_server, small_config

pytestmark = pytest.mark.timeout(180)

HEADER = "import Mathlib\n\n"
CLEAN = HEADER + "theorem t{i} (a b : Nat) : a + b = b + a := by\n  rw [Nat.add_comm]\n"
SLOW = HEADER + "--@standin: burn=0.02\ntheorem s{i} : True := trivial\n"
STUCK = HEADER + "--@standin: hang\ntheorem h{i} : True := trivial\n"
METHOD = "/leanrpc.v1.Verifier/VerifyStream"


def _raw_stream(channel):
    """VerifyStream with requests as raw bytes, so a test can send one that does not parse."""
    return channel.stream_stream(
        METHOD,
        request_serializer=lambda data: data,
        response_deserializer=pb.VerifyStreamResponse.FromString,
    )


async def test_invalid_message_after_five_snippets_still_answers_the_five():
    async with running_server() as (app, _client):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            call = _raw_stream(channel)()
            for i in range(5):
                request = pb.VerifyStreamRequest(
                    snippet=pb.Snippet(id=f"s{i}", code=CLEAN.format(i=i))
                )
                await call.write(request.SerializeToString())
            await call.write(b"\xff\xff\xff not protobuf")
            await call.done_writing()
            answers = [message.result async for message in _until_error(call)]
            assert sorted(a.id for a in answers) == [f"s{i}" for i in range(5)]
            assert all(a.status == pb.STATUS_VALID for a in answers), [a.error for a in answers]
            assert await call.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "does not parse" in await call.details()


async def test_unknown_option_mid_stream_answers_what_came_before():
    async with running_server() as (app, client):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            call = _raw_stream(channel)()
            for i in range(3):
                request = pb.VerifyStreamRequest(
                    snippet=pb.Snippet(id=f"s{i}", code=CLEAN.format(i=i))
                )
                await call.write(request.SerializeToString())
            bad = pb.VerifyStreamRequest(options=pb.VerifyOptions(infotree=99))
            await call.write(bad.SerializeToString())
            await call.done_writing()
            answers = [message.result async for message in _until_error(call)]
            assert sorted(a.id for a in answers) == ["s0", "s1", "s2"]
            assert await call.code() == grpc.StatusCode.INVALID_ARGUMENT


async def _until_error(call):
    try:
        async for message in call:
            yield message
    except grpc.aio.AioRpcError:
        return


async def test_shutdown_answers_every_accepted_snippet_of_two_streams():
    """App.stop (what SIGTERM runs) with 2 streams of 300 in flight: 600 answers,
    each finished normally or REJECTED "server shutting down"; no orphans."""
    before = descendants()
    app = await create_server(small_config(2))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    try:
        calls = []
        for k in range(2):
            call = _raw_stream(channel)()
            for i in range(300):
                template = STUCK if i % 50 == 49 else SLOW
                code = template.format(i=f"{k}_{i}")
                await call.write(
                    pb.VerifyStreamRequest(
                        snippet=pb.Snippet(id=f"{k}-{i}", code=code)
                    ).SerializeToString()
                )
            await call.done_writing()
            calls.append(call)
        drains = [asyncio.ensure_future(_drain(call)) for call in calls]
        await asyncio.sleep(1.0)  # some answered, many queued, the stuck ones hang
        await app.stop(3.0)
        results = await asyncio.gather(*drains)
    finally:
        await channel.close()
    for k, (answers, code) in enumerate(results):
        assert code == grpc.StatusCode.OK, code
        ids = [a.id for a in answers]
        assert sorted(ids) == sorted(f"{k}-{i}" for i in range(300)), len(ids)
        stopped = [a for a in answers if a.status == pb.STATUS_REJECTED]
        assert stopped, "the stop came while snippets were in flight"
        for answer in stopped:
            assert answer.error.startswith("server shutting down"), answer.error
            assert "safe to resend" in answer.error
            assert answer.HasField("retry_after") and answer.retry_after.ToMilliseconds() == 1000
        finished = [a for a in answers if a.status != pb.STATUS_REJECTED]
        assert all(a.status == pb.STATUS_VALID for a in finished)
        assert all(int(a.id.split("-")[1]) % 50 != 49 for a in finished), (
            "a hanging snippet cannot finish"
        )
    assert descendants() - before == set()


async def _drain(call):
    answers = []
    async for message in _until_error(call):
        answers.append(message.result)
    return answers, await call.code()


async def test_unary_batch_during_shutdown_gets_every_result():
    app = await create_server(small_config(1))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    try:
        stub = channel.unary_unary(
            "/leanrpc.v1.Verifier/Verify",
            request_serializer=pb.VerifyRequest.SerializeToString,
            response_deserializer=pb.VerifyResponse.FromString,
        )
        snippets = [
            pb.Snippet(id=f"u{i}", code=(STUCK if i == 3 else CLEAN).format(i=i)) for i in range(6)
        ]
        pending = asyncio.ensure_future(stub(pb.VerifyRequest(snippets=snippets)))
        await asyncio.sleep(1.0)
        await app.stop(2.0)
        response = await pending
    finally:
        await channel.close()
    by_id = {r.id: r for r in response.results}
    assert sorted(by_id) == [f"u{i}" for i in range(6)]
    assert by_id["u3"].status == pb.STATUS_REJECTED and by_id["u3"].error.startswith(
        "server shutting down"
    )
    assert by_id["u3"].HasField("retry_after") and by_id["u3"].retry_after.ToMilliseconds() == 1000
    # Exactly the unrun ones carry the resend hint; finished results are final.
    for result in by_id.values():
        assert result.HasField("retry_after") is result.error.startswith("server shutting down"), (
            result
        )


async def test_a_one_snippet_unary_call_during_shutdown_gets_its_result():
    """One snippet waits on its task itself and the shutdown's one shared deadline
    future (issue 28: no watcher task per call); a stuck one is answered at the deadline."""
    app = await create_server(small_config(1))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    try:
        stub = channel.unary_unary(
            "/leanrpc.v1.Verifier/Verify",
            request_serializer=pb.VerifyRequest.SerializeToString,
            response_deserializer=pb.VerifyResponse.FromString,
        )
        done = await stub(pb.VerifyRequest(snippets=[pb.Snippet(id="ok", code=CLEAN.format(i=0))]))
        assert done.results[0].status == pb.STATUS_VALID
        pending = asyncio.ensure_future(
            stub(pb.VerifyRequest(snippets=[pb.Snippet(id="s", code=STUCK.format(i=1))]))
        )
        await asyncio.sleep(1.0)
        await app.stop(2.0)
        response = await pending
    finally:
        await channel.close()
    [result] = response.results
    assert result.id == "s" and result.status == pb.STATUS_REJECTED
    assert result.error.startswith("server shutting down") and result.HasField("retry_after")


_SERVE = """
import asyncio, sys
sys.path.insert(0, {tests!r})
from testkit import loopback_config
from leanrpc.app import serve
config = loopback_config(2)
config.server.port = {port}
config.pool.shutdown_grace_s = 3.0
config.pool.default_timeout_s = 60
asyncio.run(serve(config))
"""


async def test_sigterm_with_two_streams_of_300_answers_all_600():
    """The real signal path: `serve` in its own process, SIGTERM mid-load."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    import psutil

    from testkit import free_port

    port = free_port()
    tests = str(Path(__file__).resolve().parent.parent)
    server = subprocess.Popen([sys.executable, "-c", _SERVE.format(tests=tests, port=port)])
    try:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        await asyncio.wait_for(channel.channel_ready(), 60)
        calls = []
        for k in range(2):
            call = _raw_stream(channel)()
            for i in range(300):
                code = (STUCK if i % 50 == 49 else SLOW).format(i=f"{k}_{i}")
                await call.write(
                    pb.VerifyStreamRequest(
                        snippet=pb.Snippet(id=f"{k}-{i}", code=code)
                    ).SerializeToString()
                )
            await call.done_writing()
            calls.append(call)
        drains = [asyncio.ensure_future(_drain(call)) for call in calls]
        await asyncio.sleep(1.5)
        workers = psutil.Process(server.pid).children(recursive=True)
        assert workers, "the server runs its REPL workers"
        os.kill(server.pid, signal.SIGTERM)
        results = await asyncio.gather(*drains)
        await channel.close()
        assert await asyncio.to_thread(server.wait, 30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    total = 0
    for k, (answers, code) in enumerate(results):
        assert code == grpc.StatusCode.OK, code
        assert sorted(a.id for a in answers) == sorted(f"{k}-{i}" for i in range(300))
        assert all(
            a.status == pb.STATUS_VALID or a.error.startswith("server shutting down")
            for a in answers
        )
        total += len(answers)
    assert total == 600
    assert not [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE], (
        "orphaned workers"
    )
