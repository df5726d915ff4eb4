"""Sessions on any REPL profile (issue 19 item 6): OpenSession picks the
profile, every command and every replay after a kill -9 runs on workers of
that profile, another profile later is INVALID_ARGUMENT with a BadRequest
field, and GetServerInfo / health are unaffected. Real server on loopback,
real stand-in REPLs."""

from __future__ import annotations

import asyncio
import os
import signal

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from leanrpc.client import ClientError
from profiles_support import profiles_config, standin, start, stop
from testkit import wait_until

# The owner of the sessions these tests open: loopback, no tokens (edge/identity.py).
LOCAL = "peer:ipv4:127.0.0.1"

PREAMBLE = "import Mathlib\nopen Nat\n\ndef double (n : Nat) : Nat := 2 * n\n"


def _config(**pool):
    return profiles_config(
        {"command": standin("--lean-version", "4.19.0"), "project_revision": "mathlib-new"},
        {
            "legacy": {
                "command": standin("--lean-version", "4.9.0"),
                "project_revision": "mathlib-old",
            }
        },
        **pool,
    )


def _profile_of(app, worker_name: str) -> str:
    [worker] = [w for w in app.pool.workers if w.name == worker_name]
    return worker.profile


def _holders(app, session_name: str) -> list:
    names = set(app.pool.sessions.get(session_name, LOCAL).realized)
    return [w for w in app.pool.workers if w.name in names and w.alive]


async def test_a_session_runs_and_replays_on_its_profile():
    app, client = await start(_config())
    try:
        opened = await client.open_session(PREAMBLE, name="old", profile="legacy")
        assert (opened.env, opened.profile, opened.result.status) == (0, "legacy", "VALID")
        assert "4.9.0" in opened.result.verifier_description
        assert _profile_of(app, opened.result.worker) == "legacy"
        step = await client.run_in_session("old", "theorem d2 : double 2 = 4 := by decide", env=0)
        assert (step.env, step.profile, step.result.status) == (1, "legacy", "VALID")
        assert "4.9.0" in step.result.verifier_description
        # naming the session's own profile is allowed too
        same = await client.run_in_session("old", "#check d2", env=1, profile="legacy")
        assert [m.text for m in same.result.messages] == ["d2 : double 2 = 4"]

        # A default-profile session next to it: its own toolchain.
        plain = await client.open_session(PREAMBLE, name="new")
        assert plain.profile == "" and "4.19.0" in plain.result.verifier_description
        assert _profile_of(app, plain.result.worker) == ""

        # kill -9 every worker holding the legacy session: the replay runs on a legacy worker.
        holders = _holders(app, "old")
        assert holders and {w.profile for w in holders} == {"legacy"}
        for worker in holders:
            os.kill(worker.pid, signal.SIGKILL)
        await wait_until(lambda: not _holders(app, "old"), 30, "the legacy holders to be reaped")
        after = await client.run_in_session("old", "#check d2", env=1)
        assert [m.text for m in after.result.messages] == ["d2 : double 2 = 4"]
        assert after.replayed_commands == 2, "root and env 1 were replayed"
        assert "4.9.0" in after.result.verifier_description
        assert _profile_of(app, after.result.worker) == "legacy"
        assert {w.profile for w in _holders(app, "old")} == {"legacy"}

        # Verify on the session: its own profile, the session unchanged.
        envs = len(app.pool.sessions.get("old", LOCAL).commands)
        [checked] = await client.verify_batch(["#check double"], session="old")
        assert checked.status == "VALID" and "4.9.0" in checked.verifier_description
        assert len(app.pool.sessions.get("old", LOCAL).commands) == envs

        # GetServerInfo and health are unaffected.
        info = await client.server_info()
        assert info.serving and [p.name for p in info.profiles] == ["", "legacy"]
        assert info.verifier.lean_version == "4.19.0"
        assert {p.name: p.verifier.lean_version for p in info.profiles} == {
            "": "4.19.0",
            "legacy": "4.9.0",
        }
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            reply = await health.Check(
                health_pb2.HealthCheckRequest(service="leanrpc.v1.Verifier"), timeout=10
            )
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await stop(app, client)


def _bad_field(info) -> None:
    assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT, info.value
    assert [field for field, _description in info.value.field_violations] == ["options.profile"]


async def test_another_profile_for_a_session_is_refused():
    app, client = await start(_config())
    try:
        await client.open_session(PREAMBLE, name="old", profile="legacy")
        await client.open_session(PREAMBLE, name="new")
        calls = [
            client.run_in_session("new", "#check double", profile="legacy"),
            client.run_in_session("old", "#check double", profile="nope"),
            client.verify_batch(["#check double"], session="old", profile="nope"),
        ]
        for call in calls:
            with pytest.raises(ClientError) as info:
                await call
            _bad_field(info)
        with pytest.raises(ClientError) as info:
            await client.run_in_session("old", "#check double", profile="other")
        _bad_field(info)
        # The default profile has no name to give, so a legacy session refuses only
        # other names; a default session refuses every named profile.
        with pytest.raises(ClientError) as info:
            await client.verify_batch(["#check double"], session="new", profile="legacy")
        _bad_field(info)
        assert "runs on the default profile, not on profile 'legacy'" in info.value.details
        # Nothing was recorded by the refused calls; both sessions still answer.
        assert len(app.pool.sessions.get("old", LOCAL).commands) == 1
        assert len(app.pool.sessions.get("new", LOCAL).commands) == 1
        ok = await client.run_in_session("old", "#check double")
        assert ok.result.status == "VALID" and ok.profile == "legacy"
    finally:
        await stop(app, client)


async def test_an_unknown_profile_is_invalid_argument_naming_the_field():
    app, client = await start(_config())
    try:
        with pytest.raises(ClientError) as info:
            await client.open_session(PREAMBLE, name="x", profile="nope")
        _bad_field(info)
        assert "unknown REPL profile 'nope'" in info.value.details
        with pytest.raises(ClientError) as info:
            await client.verify_batch(
                ["import Mathlib\n\ntheorem t : 1 = 1 := rfl"], profile="nope"
            )
        _bad_field(info)
        # No session was left behind, and the server goes on serving.
        assert len(app.pool.sessions) == 0
        opened = await client.open_session(PREAMBLE, name="x", profile="legacy")
        assert opened.result.status == "VALID"
        results = await asyncio.gather(
            client.verify_batch(["import Mathlib\n\ntheorem t : 1 = 1 := rfl"], profile="legacy"),
            client.verify(["import Mathlib\n\ntheorem u : 1 = 1 := rfl"], profile="legacy"),
        )
        assert [r.status for batch in results for r in batch] == ["VALID", "VALID"]
        assert all("4.9.0" in r.verifier_description for batch in results for r in batch)
    finally:
        await stop(app, client)
