"""Circuit breaker: consecutive boot failures stop the pool serving; it recovers after the cooldown."""

from __future__ import annotations

import asyncio
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from leanrpc.app import create_server
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc
from leanrpc.worker.launcher import Launcher
from workers_support import HEADER, make_config, wait_until

# Exits at once while the flag file exists, else becomes the stand-in.
_FLAKY_REPL = (
    "import os, sys\n"
    "if os.path.exists(sys.argv[1]):\n"
    "    sys.stderr.write('toolchain missing\\n'); sys.exit(3)\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'leanrpc.standin'])\n"
)


@pytest.fixture
async def broken_server(tmp_path):
    flag = tmp_path / "broken"
    flag.write_text("")
    config = make_config(
        workers=2,
        server__port=0,
        pool__boot_failure_limit=3,
        pool__breaker_cooldown_s=4.0,
        pool__max_retries=1,
    )
    config.repl.command = [sys.executable, "-c", _FLAKY_REPL, str(flag)]
    launcher = CountingLauncher()
    app = await create_server(config, launcher=launcher)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    app.launcher_under_test = launcher
    yield app, channel, flag
    await channel.close()
    await app.stop(2.0)


async def _wait_for_health(channel, wanted: int, timeout: float = 10.0) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    seen = []

    async def status() -> int:
        reply = await stub.Check(
            health_pb2.HealthCheckRequest(service="leanrpc.v1.Verifier"), timeout=10
        )
        seen.append(reply.status)
        return reply.status

    end = asyncio.get_running_loop().time() + timeout
    while await status() != wanted:
        assert asyncio.get_running_loop().time() < end, f"health stayed {seen[-1]}, wanted {wanted}"
        await asyncio.sleep(0.05)


class CountingLauncher(Launcher):
    """The plain launcher, counting real process launches."""

    def __init__(self) -> None:
        self.launches = 0

    async def launch(self, spec):
        self.launches += 1
        return await super().launch(spec)


def _boots(app) -> int:
    return app.launcher_under_test.launches


async def test_boot_failures_open_the_breaker_then_it_recovers(broken_server):
    app, channel, flag = broken_server
    stub = pb_grpc.VerifierStub(channel)
    request = pb.VerifyRequest(
        snippets=[pb.Snippet(id="a", code=HEADER + "theorem a : True := trivial\n")]
    )

    # The start-up boot failed once; each request adds boot attempts until
    # the limit (3) opens the breaker. Every request still gets one answer.
    codes = []
    for _ in range(3):
        try:
            await stub.Verify(request, timeout=30)
            codes.append(grpc.StatusCode.OK)
        except grpc.aio.AioRpcError as exc:
            codes.append(exc.code())
            if exc.code() is grpc.StatusCode.UNAVAILABLE and "boot" in exc.details():
                break
    assert codes[-1] is grpc.StatusCode.UNAVAILABLE, codes
    assert grpc.StatusCode.OK not in codes
    assert not app.pool.serving
    # Each failed boot is counted once: the breaker opened after exactly
    # three real launches.
    assert app.pool.stats.boot_failures == 3
    assert _boots(app) == 3

    # While open, requests are refused at once without trying to boot.
    failures_before = app.pool.stats.boot_failures
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.Verify(request, timeout=30)
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
    assert "no REPL worker can start" in refused.value.details()
    assert app.pool.stats.boot_failures == failures_before
    assert _boots(app) == 3

    # The stream answers each snippet once, with the reason.
    call = stub.VerifyStream()
    await call.write(
        pb.VerifyStreamRequest(snippet=pb.Snippet(id="s1", code=request.snippets[0].code))
    )
    await call.done_writing()
    answers = [m.result async for m in call]
    assert [(r.id, r.status) for r in answers] == [("s1", pb.STATUS_REJECTED)]
    assert "no REPL worker can start" in answers[0].error

    info = await stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=10)
    assert not info.serving
    assert "3 consecutive REPL boot failures" in info.not_serving_reason
    assert (
        "exit status 3" in info.not_serving_reason
        or "failed its boot probe" in info.not_serving_reason
    )
    # Health follows the pool within its refresh period.
    await _wait_for_health(channel, health_pb2.HealthCheckResponse.NOT_SERVING)

    # The toolchain comes back; after the cooldown the breaker lets a boot
    # through and closes on success.
    flag.unlink()
    await wait_until(lambda: app.pool.serving, 20.0, "the breaker cooldown to pass")
    reply = await stub.Verify(request, timeout=30)
    assert [r.status for r in reply.results] == [pb.STATUS_VALID]
    assert reply.results[0].verifier.kind == "stand-in"
    assert app.pool.serving
    assert app.pool.identity is not None
    await _wait_for_health(channel, health_pb2.HealthCheckResponse.SERVING)


async def test_half_open_breaker_reopens_on_the_next_failure(broken_server):
    app, channel, flag = broken_server
    stub = pb_grpc.VerifierStub(channel)
    request = pb.VerifyRequest(
        snippets=[pb.Snippet(id="a", code=HEADER + "theorem a : True := trivial\n")]
    )
    breaker = app.pool.supervisor.breaker
    # No request needed: while no worker is up the supervisor retries the
    # boot, and health says NOT_SERVING with the first cause all along.
    assert not app.pool.serving and "toolchain missing" in app.pool.not_serving_reason
    await wait_until(lambda: breaker.opened_at is not None, 20.0, "the breaker to open")
    assert not app.pool.serving
    opened, failures = breaker.opened_at, app.pool.stats.boot_failures
    # After the cooldown one trial boot runs; still broken, it re-opens at once.
    await wait_until(lambda: breaker.opened_at != opened, 20.0, "a half-open trial boot")
    assert app.pool.stats.boot_failures == failures + 1
    assert not app.pool.serving
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await stub.Verify(request, timeout=30)
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    assert not app.pool.serving


class SlowSecondLaunch(CountingLauncher):
    """Holds the second launch (the supervisor's retry boot) back for a second."""

    async def launch(self, spec):
        if self.launches == 1:
            self.launches += 1
            await asyncio.sleep(1.0)
            return await Launcher.launch(self, spec)
        return await super().launch(spec)


async def test_a_job_waits_for_the_trial_boot_rather_than_boot_beside_it(tmp_path):
    # After a failed boot only one trial boot runs at a time (half-open): a
    # request arriving during the supervisor's retry does not start its own,
    # so a job's requeued boot cannot slip past the breaker opening.
    flag = tmp_path / "broken"
    flag.write_text("")
    config = make_config(
        workers=2,
        server__port=0,
        pool__boot_failure_limit=3,
        pool__breaker_cooldown_s=30.0,
        pool__max_retries=1,
    )
    config.repl.command = [sys.executable, "-c", _FLAKY_REPL, str(flag)]
    launcher = SlowSecondLaunch()
    app = await create_server(config, launcher=launcher)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    try:
        await wait_until(lambda: app.pool.supervisor.retrying, 10.0, "the supervisor's retry boot")
        stub = pb_grpc.VerifierStub(channel)
        request = pb.VerifyRequest(
            snippets=[pb.Snippet(id="a", code=HEADER + "theorem a : True := trivial\n")]
        )
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub.Verify(request, timeout=30)
        assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
        assert app.pool.supervisor.breaker.opened_at is not None
        # start-up, the trial, the job's own: three launches, three failures.
        assert launcher.launches == 3
        assert app.pool.stats.boot_failures == 3
    finally:
        await channel.close()
        await app.stop(2.0)


async def test_a_job_whose_boots_are_spent_before_the_breaker_opens_is_not_serving(tmp_path):
    """The race of issue 41 item 2: a job that used up its boot retries while the
    breaker still allowed boots is an infrastructure failure (no REPL could start),
    answered as NOT_SERVING like the open breaker's refusals, never as a verdict."""
    flag = tmp_path / "broken"
    flag.write_text("")
    config = make_config(
        workers=1,
        server__port=0,
        pool__min_warm=0,
        pool__boot_failure_limit=50,  # stays closed through this test
        pool__max_retries=0,
    )
    config.repl.command = [sys.executable, "-c", _FLAKY_REPL, str(flag)]
    app = await create_server(config)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = pb_grpc.VerifierStub(channel)
            call = stub.VerifyStream()
            await call.write(
                pb.VerifyStreamRequest(snippet=pb.Snippet(id="s1", code=HEADER + "def x := 1"))
            )
            await call.done_writing()
            answers = [m.result async for m in call]
        assert app.pool.supervisor.breaker.allow()  # the breaker never opened
        assert [(r.id, r.status) for r in answers] == [("s1", pb.STATUS_REJECTED)]
        assert answers[0].error.startswith("no REPL worker can start"), answers[0].error
    finally:
        await app.stop(2.0)
