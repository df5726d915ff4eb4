"""The gateway over raw HTTP: shapes, failure mapping, admission, lifecycle, kill -9."""

from __future__ import annotations

import asyncio
import collections
import os
import random
import signal

import aiohttp
import pytest

from leanrpc.app import create_server
from leanrpc.edge.auth import AccessConfigError
from leanrpc.gateway import start_gateway
from testkit import free_port, loopback_config

HEADER = "import Mathlib\n\n"
BOOTED = ("idle", "busy", "warming", "reserved", "running", "loading")


async def _post(url: str, path: str, body, **kw):
    async with aiohttp.ClientSession() as session:
        async with session.post(url + path, json=body, **kw) as response:
            return response.status, await response.json(), response.headers


async def test_check_result_shape_extension_and_debug(served):
    s = await served()
    status, body, _ = await _post(
        s.url,
        "/api/check",
        {
            "snippets": [
                {"id": "ok", "code": HEADER + "theorem a : 1 + 1 = 2 := by rfl"},
                {"id": "sorry", "code": "theorem b : True := by\n  sorry"},
            ],
            "debug": True,
            "infotree": "original",
            "timeout": 20,
        },
    )
    assert status == 200
    ok, sorry = body["results"]
    assert set(ok) == {"id", "time", "response", "diagnostics", "leanrpc"}
    assert ok["leanrpc"]["status"] == "VALID" and ok["leanrpc"]["verifier"]["kind"] == "stand-in"
    assert ok["diagnostics"]["repl_uuid"] == ok["leanrpc"]["reuse"]["worker"] != ""
    assert isinstance(ok["response"]["infotree"], list) and ok["response"]["infotree"]
    assert "messages" not in ok["response"] and "sorries" not in ok["response"]
    assert ok["time"] == ok["leanrpc"]["timings"]["body_s"] >= 0
    assert sorry["leanrpc"]["status"] == "SORRY" and sorry["response"]["sorries"][0]["goal"]


async def test_backward_verify_endpoint_shape(served):
    s = await served()
    for path in ("/verify", "/one_pass_verify_batch"):
        status, body, _ = await _post(
            s.url,
            path,
            {
                "codes": [
                    {"custom_id": 7, "proof": HEADER + "theorem a : True := trivial"},
                    {"custom_id": "c", "code": "theorem b : 2 = 2 := rfl\n#check b"},
                ],
                "disable_cache": True,
            },
        )
        assert status == 200
        first, second = body["results"]
        assert first["custom_id"] == "7" and "error" not in first and first["response"]["time"] >= 0
        assert (
            second["custom_id"] == "c" and second["response"]["messages"][0]["data"] == "b : 2 = 2"
        )
    status, body, _ = await _post(s.url, "/verify", {"codes": [{"custom_id": 1}]})
    assert status == 422 and "no proof/code" in body["detail"][0]["msg"]


async def test_timeouts_crashes_and_refusals_keep_one_result_per_snippet(served):
    s = await served(workers=2)
    status, body, _ = await _post(
        s.url,
        "/api/check",
        {
            "timeout": 1,
            "snippets": [
                {"id": "hang", "code": "theorem h : True := trivial\n--@standin: hang\n"},
                {"id": "crash", "code": "theorem c : True := trivial\n--@standin: crash=kill\n"},
                {"id": "empty", "code": "   "},
                {"id": "fine", "code": "theorem f : True := trivial"},
            ],
        },
    )
    assert status == 200
    by_id = {r["id"]: r for r in body["results"]}
    assert list(by_id) == ["hang", "crash", "empty", "fine"]
    assert (
        by_id["hang"]["error"] == "Lean REPL command timed out in 1.0 seconds"
        and by_id["hang"]["time"] == 1.0
    )
    assert by_id["hang"]["leanrpc"]["status"] == "TIMEOUT"
    assert (
        by_id["crash"]["error"].startswith("Snippet execution failed")
        and "timed out" not in by_id["crash"]["error"]
    )
    assert by_id["crash"]["leanrpc"]["status"] == "CRASH"
    assert "empty" in by_id["empty"]["error"] and by_id["empty"]["leanrpc"]["status"] == "REJECTED"
    assert by_id["fine"]["leanrpc"]["status"] == "VALID" and "response" in by_id["fine"]
    for r in body["results"]:
        assert ("error" in r) != ("response" in r)


async def test_rejected_never_looks_valid_to_kimina(served):
    s = await served()
    status, body, _ = await _post(
        s.url,
        "/api/check",
        {
            "check_axioms": True,
            "snippets": [
                {"id": "ax", "code": "axiom cheat : False\ntheorem t : 1 = 2 := cheat.elim"},
                {"id": "bad-import", "code": "import NoSuchModule\n\ntheorem a : True := trivial"},
            ],
        },
    )
    assert status == 200
    for r in body["results"]:
        assert r["leanrpc"]["status"] == "REJECTED", r
        response = r["response"]
        # Kimina's analyze(): {message} is repl_error; an error message is lean_error.
        assert "message" in response or any(
            m["severity"] == "error" for m in response["messages"]
        ), r


async def test_queue_admission_and_unknown_routes(served):
    s = await served(workers=1, pool__queue_limit=2)
    status, body, headers = await _post(
        s.url,
        "/api/check",
        {"snippets": [{"id": str(i), "code": "theorem t : True := trivial"} for i in range(3)]},
    )
    assert status == 429 and "queue" in body["detail"] and int(headers["Retry-After"]) >= 1
    async with aiohttp.ClientSession() as session:
        async with session.get(s.url + "/api/ast?module=Mathlib") as r:
            assert r.status == 501 and "AST" in (await r.json())["detail"]
        async with session.get(s.url + "/nowhere") as r:
            assert r.status == 404 and (await r.json()) == {"detail": "Not Found"}
        async with session.get(s.url + "/api/check") as r:
            assert r.status == 405 and "detail" in await r.json()


async def test_per_client_limit_and_batch_limit(served):
    s = await served(server__max_concurrent_per_client=1, server__max_snippets_per_batch=3)
    slow = {
        "snippets": [{"id": "s", "code": "theorem t : True := trivial\n--@standin: burn=1.5\n"}]
    }
    first = asyncio.ensure_future(_post(s.url, "/api/check", slow))
    await asyncio.sleep(0.3)
    status, body, _ = await _post(
        s.url, "/api/check", {"snippets": [{"id": "q", "code": "theorem q : True := trivial"}]}
    )
    assert status == 429 and "max_concurrent_per_client" in body["detail"]
    assert (await first)[0] == 200
    status, body, _ = await _post(
        s.url,
        "/api/check",
        {"snippets": [{"id": str(i), "code": "theorem t : True := trivial"} for i in range(4)]},
    )
    assert status == 422 and "over the limit" in body["detail"][0]["msg"]


async def test_create_server_starts_the_gateway_when_http_port_is_set_and_stop_closes_it():
    config = loopback_config(workers=1)
    config.gateway.http_port = free_port()
    app = await create_server(config)
    url = f"http://127.0.0.1:{config.gateway.http_port}"
    try:
        assert app.gateway is not None and app.gateway.port == config.gateway.http_port
        async with aiohttp.ClientSession() as session:
            async with session.get(url + "/health") as r:
                assert r.status == 200 and (await r.json())["status"] == "ok"
    finally:
        await app.stop(2.0)
    with pytest.raises(aiohttp.ClientConnectionError):
        await _post(url, "/api/check", {"snippets": [{"id": "a", "code": "#check Nat"}]})
    off = loopback_config(workers=1)
    app = await create_server(off)
    try:
        assert app.gateway is None  # off by default
    finally:
        await app.stop(2.0)


async def test_gateway_refuses_a_public_host_without_tokens():
    config = loopback_config(workers=1)
    with pytest.raises(AccessConfigError):
        await start_gateway(verify=None, config=config, host="0.0.0.0", port=0)


async def test_kill_9_of_workers_during_a_rest_batch_answers_every_snippet_once(served):
    s = await served(workers=2, pool__max_retries=1)
    n = 60
    snippets = [
        {"id": f"k{i}", "code": f"theorem t{i} : True := trivial\n--@standin: burn=0.05\n"}
        for i in range(n)
    ]
    batch = asyncio.ensure_future(_post(s.url, "/api/check", {"snippets": snippets, "timeout": 30}))
    kills = 0
    rng = random.Random(7)
    while not batch.done():
        # Booted workers only: a kill during boot is a boot failure (the circuit breaker's tests).
        pids = [w.pid for w in s.app.pool.workers if w.pid and w.state.value in BOOTED]
        if pids:
            try:
                os.kill(rng.choice(pids), signal.SIGKILL)
                kills += 1
            except ProcessLookupError:
                pass
        await asyncio.wait({batch}, timeout=0.4)
    status, body, _ = batch.result()
    assert status == 200
    counts = collections.Counter(r["id"] for r in body["results"])
    assert [r["id"] for r in body["results"]] == [x["id"] for x in snippets] and set(
        counts.values()
    ) == {1}
    statuses = collections.Counter(r["leanrpc"]["status"] for r in body["results"])
    assert set(statuses) <= {"VALID", "CRASH"}, statuses
    assert kills >= 2
    # A CRASH needs every attempt killed: never more crashes than kills allow.
    assert statuses["CRASH"] * 2 <= kills, (statuses, kills)
    assert all(
        r["error"].startswith("Snippet execution failed")
        for r in body["results"]
        if r["leanrpc"]["status"] == "CRASH"
    )


async def test_check_snippet_reference_pins_the_statement(served):
    """leanrpc's extension (issue 25): `/api/check` snippets may carry a
    `reference`; a changed statement is INVALID with an error Kimina's
    analyze() sees, and a bad reference is 422 naming its place."""
    s = await served()
    reference = HEADER + "theorem a : 1 + 1 = 2 := by sorry"
    status, body, _ = await _post(
        s.url,
        "/api/check",
        {
            "snippets": [
                {
                    "id": "good",
                    "code": HEADER + "theorem a : 1 + 1 = 2 := by rfl",
                    "reference": reference,
                },
                {
                    "id": "changed",
                    "code": HEADER + "theorem a : 1 + 0 = 1 := by rfl",
                    "reference": reference,
                },
                {"id": "unpinned", "code": HEADER + "theorem a : 1 + 0 = 1 := by rfl"},
            ]
        },
    )
    assert status == 200
    good, changed, unpinned = body["results"]
    assert good["leanrpc"]["status"] == "VALID" and good["leanrpc"]["reference"]["passed"]
    assert changed["leanrpc"]["status"] == "INVALID"
    assert changed["leanrpc"]["reference"]["reason"] == "STATEMENT_MISMATCH"
    assert any(
        m["severity"] == "error" and "reference check" in m["data"]
        for m in changed["response"]["messages"]
    )
    assert unpinned["leanrpc"]["status"] == "VALID" and "reference" not in unpinned["leanrpc"]
    status, body, _ = await _post(
        s.url,
        "/api/check",
        {
            "snippets": [
                {
                    "id": "x",
                    "code": HEADER + "theorem a : True := trivial",
                    "reference": HEADER + "-- nothing\n",
                }
            ]
        },
    )
    assert status == 422 and body["detail"][0]["loc"] == ["body", "snippets", 0, "reference"]
    assert "declares no theorem" in body["detail"][0]["msg"]


async def test_axioms_are_checked_by_default_on_check_and_verify(served):
    # Issue 25 item 3: no check_axioms field = the server default (on); false turns it off.
    s = await served()
    cheat = "axiom cheat : False\ntheorem t : 1 = 2 := cheat.elim"
    _, default, _ = await _post(s.url, "/api/check", {"snippets": [{"id": "ax", "code": cheat}]})
    assert default["results"][0]["leanrpc"]["status"] == "REJECTED", default
    _, off, _ = await _post(
        s.url, "/api/check", {"check_axioms": False, "snippets": [{"id": "ax", "code": cheat}]}
    )
    assert off["results"][0]["leanrpc"]["status"] == "VALID", off
    _, verified, _ = await _post(s.url, "/verify", {"codes": [{"custom_id": "ax", "proof": cheat}]})
    assert verified["results"][0]["leanrpc"]["status"] == "REJECTED", verified
