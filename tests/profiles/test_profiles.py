"""Several REPL profiles (toolchains) in one server (issue 19 item 6): config
tables, two profiles served at once with separate identities, cache keys per
profile, unknown profile INVALID_ARGUMENT. Real server, real stand-in REPLs."""

from __future__ import annotations

import asyncio
import sys

import grpc
import pytest

from leanrpc.app import create_server
from leanrpc.config import Config, ConfigError
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc

CODE = "import Mathlib\n\ntheorem two : 1 + 1 = 2 := rfl\n"


def standin(*flags: str) -> list[str]:
    return [sys.executable, "-m", "leanrpc.standin", "--no-replay", *flags]


def test_repl_tables_are_profiles_that_inherit_the_default(tmp_path):
    path = tmp_path / "leanrpc.toml"
    path.write_text(
        '[repl]\ncommand = "lean-repl-a"\nproject_revision = "mathlib-a"\nrepl_revision = "r1"\n'
        '[repl.old]\ncommand = "lean-repl-b --x"\nproject_revision = "mathlib-b"\ncwd = "projb"\n'
    )
    config = Config.from_toml(path)
    assert config.repl.profile_names == ["", "old"]
    old = config.repl.profile("old")
    assert old.command == ["lean-repl-b", "--x"] and old.project_revision == "mathlib-b"
    assert old.repl_revision == "r1"  # left out: the default's
    assert old.cwd == str((tmp_path / "projb").resolve())
    assert config.repl.profile("").command == ["lean-repl-a"]
    with pytest.raises(ConfigError, match="unknown REPL profile 'new'"):
        config.repl.profile("new")
    with pytest.raises(ConfigError, match="unknown config key"):
        Config.from_dict({"repl": {"old": {"comand": "x"}}})


def _config(cache: bool = True) -> Config:
    config = Config()
    config.server.port = 0
    config.pool.workers = 2
    config.pool.min_warm = 1
    config.limits.max_system_memory_percent = 0
    config.repl.command = standin("--lean-version", "4.19.0")
    config.repl.project_revision = "mathlib-new"
    config.repl.repl_revision = "repl-new"
    config = Config.from_dict(
        {
            **config.to_dict(),
            "repl": {
                **config.to_dict()["repl"],
                "legacy": {
                    "command": standin("--lean-version", "4.9.0"),
                    "project_revision": "mathlib-old",
                },
            },
        }
    )
    config.cache.enabled = cache
    return config


@pytest.mark.asyncio
async def test_two_profiles_served_at_once_with_separate_identities():
    app = await create_server(_config())
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    stub = pb_grpc.VerifierStub(channel)
    try:

        async def verify(code: str, profile: str, sid: str) -> pb.Result:
            reply = await stub.Verify(
                pb.VerifyRequest(
                    snippets=[pb.Snippet(id=sid, code=code)],
                    options=pb.VerifyOptions(profile=profile),
                ),
                timeout=60,
            )
            return reply.results[0]

        # Both at once, several each: the slots are shared by demand.
        codes = [CODE.replace("two", f"two{i}") for i in range(4)]
        results = await asyncio.gather(
            *(verify(c, p, f"{p}-{i}") for i, c in enumerate(codes) for p in ("", "legacy"))
        )
        by_profile = {
            "": [r for r in results if not r.id.startswith("legacy")],
            "legacy": [r for r in results if r.id.startswith("legacy")],
        }
        for profile, found in by_profile.items():
            assert all(r.status == pb.STATUS_VALID for r in found), [r.error for r in found]
        assert {r.verifier.lean_version for r in by_profile[""]} == {"4.19.0"}
        assert {r.verifier.project_revision for r in by_profile[""]} == {"mathlib-new"}
        assert {r.verifier.lean_version for r in by_profile["legacy"]} == {"4.9.0"}
        assert {r.verifier.project_revision for r in by_profile["legacy"]} == {"mathlib-old"}
        assert {r.verifier.repl_revision for r in by_profile["legacy"]} == {"repl-new"}  # inherited

        info = await stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=10)
        listed = {p.name: p.verifier for p in info.profiles}
        assert list(listed) == ["", "legacy"]
        assert listed[""].lean_version == "4.19.0" and listed["legacy"].lean_version == "4.9.0"
        assert {w.profile for w in app.pool.workers} <= {"", "legacy"}

        # Cache keys per profile: the result cache keys each request on its
        # profile's identity, so the same text never meets the other toolchain's verdict.
        from leanrpc.cache.keys import cache_key
        from leanrpc.core.headers import split_header

        split = split_header(CODE)
        keys = {
            p: cache_key(app.verify.settings(p), split, infotree=None, check_axioms=False)
            for p in ("", "legacy")
        }
        assert keys[""] != keys["legacy"]
        assert app.verify.settings("legacy").identity.lean_version == "4.9.0"

        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await verify(CODE, "nope", "x")
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "unknown REPL profile 'nope'" in bad.value.details()
        # The server keeps serving after it.
        assert (await verify(CODE, "legacy", "after")).status == pb.STATUS_VALID
    finally:
        await channel.close()
        await app.stop(2.0)
