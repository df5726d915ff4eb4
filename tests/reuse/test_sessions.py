"""Sessions over gRPC: env ids stay valid after the worker holding them is killed."""

from __future__ import annotations

import asyncio
import os
import signal

import grpc
import pytest

from leanrpc.client import Client, ClientError
from reuse_support import start, stop

# The owner of the sessions these tests open: loopback, no tokens (edge/identity.py).
LOCAL = "peer:ipv4:127.0.0.1"

PREAMBLE = "import Mathlib\nopen Nat\n\ndef double (n : Nat) : Nat := 2 * n\n"


def _holder_pid(app, session_name: str) -> int:
    session = app.pool.sessions.get(session_name, LOCAL)
    names = set(session.realized)
    pids = [w.pid for w in app.pool.workers if w.name in names and w.alive]
    assert pids, "some live worker holds the session"
    return pids[0]


async def _wait_dead(pid: int) -> None:
    import psutil

    for _ in range(200):
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"pid {pid} still alive")


async def test_session_env_survives_kill_9():
    app, client = await start(workers=1)
    try:
        opened = await client.open_session(PREAMBLE, name="proj")
        assert opened.session == "proj" and opened.env == 0
        assert opened.result.status == "VALID" and opened.result.verifier == "stand-in"
        step1 = await client.run_in_session("proj", "theorem d2 : double 2 = 4 := by decide", env=0)
        assert step1.env == 1 and step1.result.status == "VALID"
        step2 = await client.run_in_session("proj", "theorem uses : double 2 = 4 := d2", env=1)
        assert step2.env == 2 and step2.result.status == "VALID"
        # d2 only exists on env 1's branch
        assert [
            m.text
            for m in (await client.run_in_session("proj", "#check d2", env=1)).result.messages
        ] == ["d2 : double 2 = 4"]
        assert (await client.run_in_session("proj", "#check d2", env=0)).result.messages == []
        before = await client.run_in_session(
            "proj", "example : double 3 = 6 := by decide\n#check uses", env=2
        )
        assert before.replayed_commands == 0
        assert [m.text for m in before.result.messages] == ["uses : double 2 = 4"]

        pid = _holder_pid(app, "proj")
        os.kill(pid, signal.SIGKILL)
        await _wait_dead(pid)

        after = await client.run_in_session(
            "proj", "example : double 3 = 6 := by decide\n#check uses", env=2
        )
        assert after.result.status == before.result.status == "VALID"
        assert [(m.severity, m.line, m.text) for m in after.result.messages] == [
            (m.severity, m.line, m.text) for m in before.result.messages
        ]
        assert after.replayed_commands == 3, "root, env 1 and env 2 were replayed on the new worker"
        assert after.env is not None and after.env > before.env
        assert app.pool.stats.session_replays >= 3
        # the branch still works after the restart, and replays nothing more
        again = await client.run_in_session("proj", "#check d2", env=1)
        assert [m.text for m in again.result.messages] == [
            "d2 : double 2 = 4"
        ] and again.replayed_commands == 0
        assert (await client.run_in_session("proj", "#check d2", env=0)).result.messages == []
        assert await client.close_session("proj") is True
        assert await client.close_session("proj") is False
    finally:
        await stop(app, client)


async def test_verify_with_session_runs_on_env_0():
    app, client = await start(workers=2)
    try:
        opened = await client.open_session(PREAMBLE)
        name = opened.session
        assert name and opened.env == 0
        results = await client.verify_batch(
            [
                ("a", "theorem a : double 1 = 2 := by decide"),
                ("b", "theorem b : 1 = 1 := by exact Nat.nonexistent_thing"),
            ],
            session=name,
        )
        assert [r.id for r in results] == ["a", "b"]
        assert [r.status for r in results] == ["VALID", "INVALID"]
        # the session is unchanged: Verify does not add envs
        assert len(app.pool.sessions.get(name, LOCAL).commands) == 1

        # the streaming call takes the same option, async and blocking
        snippets = [
            ("s1", "#check double"),
            ("s2", "theorem s2 : 1 = 1 := by exact Nat.nonexistent_thing"),
        ]
        expected = [("s1", "VALID", ["double (n : Nat) : Nat"]), ("s2", "INVALID")]

        def summary(results) -> list:
            return [
                (r.id, r.status, [m.text for m in r.messages]) if r.id == "s1" else (r.id, r.status)
                for r in results
            ]

        assert summary(await client.verify(snippets, session=name)) == expected
        # without the session `double` is not in scope: the option really selects the env
        [plain] = await client.verify([snippets[0]])
        assert [m.text for m in plain.messages] == []

        def blocking() -> list:
            with Client(f"127.0.0.1:{app.port}", max_retries=0) as sync_client:
                return sync_client.verify(snippets, session=name)

        assert summary(await asyncio.to_thread(blocking)) == expected
        assert len(app.pool.sessions.get(name, LOCAL).commands) == 1
    finally:
        await stop(app, client)


_INVALID = grpc.StatusCode.INVALID_ARGUMENT
_NOT_FOUND = grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    "call, code",
    [
        (lambda c: c.run_in_session("nope", "theorem x : True := trivial"), _NOT_FOUND),
        (lambda c: c.run_in_session("s", "import Aesop\ntheorem x : True := trivial"), _INVALID),
        (lambda c: c.run_in_session("s", "theorem x : True := trivial", env=7), _INVALID),
        (lambda c: c.run_in_session("s", "   "), _INVALID),
        (lambda c: c.open_session(PREAMBLE, name="s"), _INVALID),
        (lambda c: c.open_session(PREAMBLE, name="has space"), _INVALID),
        (lambda c: c.verify_batch(["theorem x : True := trivial"], session="nope"), _NOT_FOUND),
        (lambda c: c.verify(["theorem x : True := trivial"], session="nope"), None),
    ],
    ids=[
        "unknown-session",
        "imports",
        "unknown-env",
        "empty",
        "duplicate-name",
        "bad-name",
        "verify-unknown",
        "stream-unknown",
    ],
)
async def test_bad_session_requests_are_refused_with_the_right_code(call, code):
    app, client = await start(workers=1)
    try:
        assert (await client.open_session(PREAMBLE, name="s")).env == 0
        if code is None:
            # A stream answers each snippet; an unknown session rejects that snippet.
            results = await call(client)
            assert [r.status for r in results] == ["REJECTED"]
            assert "unknown session 'nope'" in results[0].error
            return
        with pytest.raises(ClientError) as info:
            await call(client)
        assert info.value.code is code
    finally:
        await stop(app, client)


async def test_session_limit_is_resource_exhausted():
    app, client = await start(workers=1, pool__max_sessions=1)
    try:
        await client.open_session(PREAMBLE, name="one")
        with pytest.raises(ClientError) as info:
            await client.open_session(PREAMBLE, name="two")
        assert info.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert await client.close_session("one")
        assert (await client.open_session(PREAMBLE, name="two")).env == 0
    finally:
        await stop(app, client)
