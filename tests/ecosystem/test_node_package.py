"""The packed Node package (`npm pack`), installed in an empty folder, against live servers.

Covers: the contract travels inside the tarball; verify works from the
install (no ../../proto at run time); UNAVAILABLE is retried until a late
server starts; snippets a tiny queue refuses are re-sent and nothing already
answered runs twice; a stream that fails keeps the results received.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from leanrpc.app import create_server
from leanrpc.config import Config
from testkit import free_port, loopback_config

REPO = Path(__file__).resolve().parents[2]
NODE_DIR = REPO / "clients" / "node"
PACKAGE_FILES = {
    "package.json",
    "index.js",
    "lib/proto.js",
    "lib/retry.js",
    "lib/convert.js",
    "lib/prover.js",
    "proto/leanrpc/v1/verifier.proto",
    "proto/leanrpc/v1/formalizer.proto",
    "proto/leanrpc/v1/prover.proto",
    "proto/leanrpc/v1/header_hash_vectors.json",
    # googleapis' google.rpc protos: the rich error status (RetryInfo, ...)
    "proto/google/rpc/status.proto",
    "proto/google/rpc/error_details.proto",
}


def _npm(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["npm", *args, "--no-audit", "--no-fund"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"npm {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> dict:
    """`npm pack` of clients/node: {"tarball": Path, "files": set of paths}."""
    assert shutil.which("node") and shutil.which("npm"), (
        "node and npm are needed for the Node package test"
    )
    out = tmp_path_factory.mktemp("pack")
    [info] = json.loads(_npm("pack", "--json", "--pack-destination", str(out), cwd=NODE_DIR))
    return {"tarball": out / info["filename"], "files": {f["path"] for f in info["files"]}}


@pytest.fixture(scope="module")
def installed(packed, tmp_path_factory) -> Path:
    """An empty folder with only the tarball installed (and the check script)."""
    folder = tmp_path_factory.mktemp("consumer")
    # The npm cache (filled by `npm ci` in clients/node) serves the dependencies when it can.
    _npm("install", "--prefer-offline", str(packed["tarball"]), cwd=folder)
    shutil.copy(NODE_DIR / "test" / "installed-check.js", folder)
    assert not (
        folder / "node_modules" / "proto"
    ).exists()  # what ../../proto would be from the package
    return folder


def _node_env() -> dict:
    env = dict(os.environ)
    env.pop("LEANRPC_PROTO_ROOT", None)
    return env


class NodeCheck:
    """`node installed-check.js MODE ADDRESS [RETRIES]`, read line by line."""

    def __init__(self, folder: Path, *args: str) -> None:
        self.folder, self.args = folder, args
        self.events: list[dict] = []

    async def __aenter__(self) -> "NodeCheck":
        self.proc = await asyncio.create_subprocess_exec(
            "node",
            "installed-check.js",
            *self.args,
            cwd=self.folder,
            env=_node_env(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return self

    async def __aexit__(self, *exc) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    async def next_event(self, timeout: float = 120) -> dict:
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            await self.proc.wait()
            stderr = (await self.proc.stderr.read()).decode()
            raise AssertionError(
                f"node exited {self.proc.returncode} before the next line: {stderr}"
            )
        self.events.append(json.loads(line))
        return self.events[-1]

    async def outcome(self, timeout: float = 120) -> dict:
        while "mode" not in (event := await self.next_event(timeout)):
            pass
        assert await asyncio.wait_for(self.proc.wait(), 30) == 0
        return event

    @property
    def retries(self) -> list[dict]:
        return [e for e in self.events if "retry" in e]


@contextlib.asynccontextmanager
async def live_server(**overrides):
    app = await create_server(loopback_config(**overrides))
    try:
        yield app
    finally:
        await app.stop(2.0)


def test_packed_tarball_carries_the_contract(packed):
    assert packed["files"] == PACKAGE_FILES
    with tarfile.open(packed["tarball"]) as tar:
        for name in ("verifier.proto", "formalizer.proto", "prover.proto"):
            inside = tar.extractfile(f"package/proto/leanrpc/v1/{name}").read()
            assert inside == (REPO / "proto" / "leanrpc" / "v1" / name).read_bytes()


async def test_installed_package_verifies_against_a_live_server(installed):
    async with live_server(workers=2, cache__enabled=True) as app:
        async with NodeCheck(installed, "verify", f"127.0.0.1:{app.port}") as node:
            outcome = await node.outcome(240)
        # The 37th and 38th ask for no cache; the 39th is answered from it.
        assert outcome["sources"] == ["", "", "memory"]
        assert outcome["ok"] and outcome["info"] == "stand-in"
        statuses = [r["status"] for r in outcome["results"]]
        assert statuses == [("VALID", "SORRY", "INVALID")[i % 3] for i in range(36)]
        assert [r["id"] for r in outcome["results"]] == [f"p{i}" for i in range(36)]
        assert {r["verifier"] for r in outcome["results"]} == {"stand-in"}
        assert node.retries == []
        assert app.pool.stats.jobs_finished == 38


async def test_installed_package_opens_sessions_on_a_profile(installed):
    config = loopback_config(workers=2)
    data = config.to_dict()
    data["repl"]["legacy"] = {"command": [*config.repl.command, "--lean-version", "4.9.0"]}
    app = await create_server(Config.from_dict(data))
    try:
        async with NodeCheck(installed, "sessions", f"127.0.0.1:{app.port}") as node:
            outcome = await node.outcome(240)
        assert outcome["ok"], outcome
        default_version = app.pool.identity_of("").lean_version
        assert default_version != "4.9.0"
        assert outcome["versions"] == ["4.9.0", "4.9.0", default_version, "4.9.0"]
        assert outcome["closed"] == [True, False]
        assert [s.profile for s in app.pool.sessions] == [
            ""
        ]  # the default-profile session is left open
    finally:
        await app.stop(2.0)


async def test_unavailable_is_retried_until_a_late_server_starts(installed):
    port = free_port()
    async with NodeCheck(installed, "late", f"127.0.0.1:{port}", "30") as node:
        first = await node.next_event()
        assert first["retry"] == 1 and first["code"] == "UNAVAILABLE"  # nothing listens yet
        config = loopback_config(workers=1)
        config.server.port = port
        app = await create_server(config)
        try:
            outcome = await node.outcome()
        finally:
            await app.stop(2.0)
    assert outcome["ok"], outcome
    assert [r["status"] for r in outcome["results"]] == ["VALID", "SORRY", "INVALID"]
    assert {r["code"] for r in node.retries} == {"UNAVAILABLE"}

    # A server that never comes: the bounded retries run out with UNAVAILABLE.
    async with NodeCheck(installed, "late", f"127.0.0.1:{free_port()}", "2") as node:
        outcome = await node.outcome()
    assert (outcome["ok"], outcome["code"], outcome["partial"]) == (False, "UNAVAILABLE", [])
    assert [r["retry"] for r in node.retries] == [1, 2]
    # Exponential with jitter: base 50 ms doubled, each within x0.5 .. x1.5.
    assert 25 <= node.retries[0]["delayMs"] <= 75 and 50 <= node.retries[1]["delayMs"] <= 150


async def test_snippets_a_full_queue_refuses_are_resent(installed):
    async with live_server(workers=1, pool__queue_limit=2) as app:
        address = f"127.0.0.1:{app.port}"
        # Without retries the refusals are the answers.
        async with NodeCheck(installed, "overload", address, "0") as node:
            first = await node.outcome()
        refused = [r for r in first["results"] if r["status"] == "REJECTED"]
        assert refused and all(
            r["error"].startswith("RESOURCE_EXHAUSTED: queue full") for r in refused
        )
        # The hint is a field (Result.retry_after), not text to parse.
        assert all(r["retry_after_ms"] > 0 for r in refused)
        assert all(
            r["retry_after_ms"] is None for r in first["results"] if r["status"] != "REJECTED"
        )
        assert sum(r["status"] == "VALID" for r in first["results"]) == 7 - len(refused)
        assert node.retries == []

        # With retries every snippet is verified, in input order, each run once.
        before = app.pool.stats.jobs_finished
        async with NodeCheck(installed, "overload", address, "8") as node:
            outcome = await node.outcome()
        assert [(r["id"], r["status"]) for r in outcome["results"]] == [("slow", "VALID")] + [
            (f"q{i}", "VALID") for i in range(6)
        ]
        assert node.retries and all(r["resent"] > 0 and r["code"] is None for r in node.retries)
        # The server's retry hint is the floor of each wait.
        assert all(r["delayMs"] >= 100 for r in node.retries)
        assert app.pool.stats.jobs_finished - before == 7


async def test_a_stream_that_fails_keeps_the_results_received(installed):
    app = await create_server(loopback_config(workers=1))
    try:
        async with NodeCheck(installed, "partial", f"127.0.0.1:{app.port}", "2") as node:
            received = [(await node.next_event())["result"] for _ in range(2)]
            assert [(r["id"], r["status"]) for r in received] == [("q0", "VALID"), ("q1", "VALID")]
            await app.stop(0.5)  # the hanging snippet is never answered
            outcome = await node.outcome()
    finally:
        await app.stop(0.5)
    assert outcome["ok"] is False and outcome["code"] == "UNAVAILABLE", outcome
    assert [(r["id"], r["status"]) for r in outcome["partial"]] == [
        ("q0", "VALID"),
        ("q1", "VALID"),
    ]


async def test_a_stream_cut_by_a_graceful_stop_finishes_on_the_restarted_server(installed):
    """A rolling deploy under a 3,000-snippet stream: the graceful stop answers
    what it read and ends the stream OK with the rest unread; the client sends
    the rest to the new server on the same port. Each snippet answered once."""
    config = loopback_config(workers=2)
    config.server.port = free_port()
    app = await create_server(config)
    try:
        async with NodeCheck(installed, "restart", f"127.0.0.1:{config.server.port}", "30") as node:
            assert (await node.next_event(120)) == {"progress": 100}
            await app.stop(0.5)  # what SIGTERM runs
            app = await create_server(config)
            outcome = await node.outcome(240)
    finally:
        await app.stop(2.0)
    assert outcome["ok"], outcome
    assert (outcome["count"], outcome["answered"], outcome["inOrder"]) == (3000, 3000, True)
    assert outcome["statuses"] == ["VALID"]
    assert node.retries, "the stop came while the stream was open"


def test_resend_rule_matches_the_python_client(installed):
    from types import SimpleNamespace

    from leanrpc.client import resend_hint_s

    # (status, error, retry hint in ms or None): only the structured hint counts.
    cases = [
        ("REJECTED", "RESOURCE_EXHAUSTED: queue full (100 queued)", 250),
        ("REJECTED", "server shutting down", 1500),
        ("REJECTED", "server shutting down", 0),
        ("REJECTED", "server shutting down; retry after 1500 ms", None),
        ("REJECTED", "unknown session s1", None),
        ("VALID", "", 5),
    ]
    script = (
        "const {resendHintMs}=require('@leanrpc/client');"
        "console.log(JSON.stringify(JSON.parse(process.argv[1]).map(([status,error,ms])=>resendHintMs({status,error,retry_after_ms:ms}))))"
    )
    out = subprocess.run(
        ["node", "-e", script, json.dumps(cases)],
        cwd=installed,
        env=_node_env(),
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    node_hints = json.loads(out.stdout)
    assert node_hints == [250, 1500, 0, None, None, None]
    python_hints = [
        resend_hint_s(
            SimpleNamespace(status=s, error=e, retry_after_s=None if ms is None else ms / 1000)
        )
        for s, e, ms in cases
    ]
    assert [None if h is None else round(h * 1000) for h in python_hints] == node_hints


def test_backoff_is_bounded_in_both_clients_and_a_server_hint_is_its_floor(installed):
    from leanrpc.client import MAX_BACKOFF_S, backoff_s

    # (base ms, attempt, server hint ms): pauses for attempt 1, a late attempt, a huge one, and a long hint.
    cases = [(200, 1, 0), (200, 12, 0), (200, 10_000, 0), (200, 3, 90_000)]
    script = (
        "const {backoffMs,MAX_BACKOFF_MS}=require('@leanrpc/client');"
        "console.log(JSON.stringify({max:MAX_BACKOFF_MS,pauses:JSON.parse(process.argv[1]).map("
        "([b,a,h])=>Array.from({length:50},()=>backoffMs(b,a,h)))}))"
    )
    out = subprocess.run(
        ["node", "-e", script, json.dumps(cases)],
        cwd=installed,
        env=_node_env(),
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    node = json.loads(out.stdout)
    assert node["max"] == MAX_BACKOFF_S * 1000
    python = [[backoff_s(b / 1000, a, h / 1000) * 1000 for _ in range(50)] for b, a, h in cases]
    for pauses in (node["pauses"], python):
        first, late, huge, hinted = pauses
        assert all(100 <= p <= 300 for p in first)  # 200 ms x jitter 0.5..1.5
        assert (
            all(p <= MAX_BACKOFF_S * 1000 for p in late + huge) and max(late) > MAX_BACKOFF_S * 500
        )
        assert all(p == 90_000 for p in hinted)  # the server's hint is a floor, even above the cap
