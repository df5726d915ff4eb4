"""A code-running snippet sent through lean_check or lean_tactic is refused exactly as
on Verify and the Prover's RunTactic: the same status and text, and the REPL (a hostile
one that forges VALID for such text, tests/policy/forging_repl.py) never sees it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agents_support import call, http_agent, ok
from leanrpc.app import create_server, start_agents_door
from leanrpc.client import AsyncClient, ClientError
from testkit import loopback_config, stop_server

FORGING = [sys.executable, str(Path(__file__).parents[1] / "policy" / "forging_repl.py")]
HEADER = "import Mathlib\n\n"
WRONG = "theorem two_plus_two : 2 + 2 = 5 := bad_proof\n"
ATTACKS = [
    WRONG + '#eval IO.println "forged"',
    WRONG + "run_cmd pure ()",
    "theorem t : 2 + 2 = 5 := by\n  run_tac pure ()\n  exact bad_proof",
    WRONG + 'elab "forge" : command => pure ()',
    "set_option debug.skipKernelTC true in\n" + WRONG,
]
TACTICS = ["run_tac pure ()", 'run_tac (Lean.logInfo "x")', "native_decide"]


@pytest.fixture
async def hostile(tmp_path):
    log = tmp_path / "fired.jsonl"
    log.write_text("")
    config = loopback_config(1, sandbox__mode="off")  # the log file is the test's
    config.repl.command = FORGING + [str(log)]
    app = await create_server(config)
    app.mcp = await start_agents_door(app, port=0)
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    yield app, client, log
    await stop_server(app, client)


async def test_lean_check_refuses_code_running_snippets_as_verify_does(hostile):
    app, grpc_client, log = hostile
    snippets = [HEADER + a for a in ATTACKS]
    on_verify = await grpc_client.verify_batch(snippets, check_axioms=False)
    async with http_agent(app.mcp.url) as agent:
        for snippet, verified in zip(snippets, on_verify):
            checked = await ok(agent, "lean_check", code=snippet)
            assert verified.status == "REJECTED" and checked["status"] == "REJECTED", snippet
            assert checked["error"] == verified.error and "code policy `proof`" in checked["error"]
            assert checked["checks"]["policy"] == "proof" == verified.checks.policy
            assert checked["retry"]["retryable"] is False
        good = await ok(agent, "lean_check", code=HEADER + "theorem ok : True := trivial\n")
    assert good["status"] == "VALID"  # the same door lets a proof through: the test can fail
    assert log.read_text() == ""


async def test_lean_tactic_refuses_code_running_tactics_as_run_tactic_does(hostile):
    app, grpc_client, log = hostile
    code = HEADER + "theorem t : True := sorry"
    started = await grpc_client.start_proof(code)
    async with http_agent(app.mcp.url) as agent:
        mine = await ok(agent, "lean_proof_state", code_with_sorry=code)
        state = mine["states"][0]["state_id"]
        for tactic in TACTICS:
            with pytest.raises(ClientError) as refused:
                await grpc_client.run_tactic(started.states[0].state_id, tactic)
            is_error, answer = await call(agent, "lean_tactic", state_id=state, tactic=tactic)
            assert is_error and answer["error"]["code"] == refused.value.code.name
            assert answer["error"]["message"] == refused.value.details, tactic
            assert "code policy" in answer["error"]["message"]
        tried = await ok(agent, "lean_multi_attempt", state_id=state, tactics=TACTICS)
    for attempt in tried["attempts"]:
        assert attempt["status"] == "REJECTED" and attempt["error"]["code"] == "INVALID_ARGUMENT"
        assert "code policy `proof`" in attempt["error"]["message"]
    assert log.read_text() == "", [json.loads(line) for line in log.read_text().splitlines()]
