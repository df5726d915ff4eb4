"""Issue 43: each way the old policy misread Lean is refused at every door
(Verify, VerifyStream, sessions, the REST gateway, StartProof, RunTactic,
Extract), against a hostile REPL that reads Lean as Lean does
(lean_forging_repl.py: it forges a clean VALID whenever it receives text Lean
would run, and logs it). The log stays empty; the brace string is VALID."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import aiohttp
import grpc
import pytest

from lean_reference import code_running
from leanrpc.app import create_server
from leanrpc.client import AsyncClient, ClientError
from testkit import free_port, loopback_config, stop_server

FORGER = [sys.executable, str(Path(__file__).with_name("lean_forging_repl.py"))]
HEADER = "import Mathlib\n\n"
WRONG = "theorem two_plus_two : 2 + 2 = 5 := bad_proof\n"
# One example per cause in the issue, each before (or around) a wrong proof.
CAUSES = {
    "glued #eval": '#evalIO.println "x"\n' + WRONG,
    "ident#eval": 'theorem t : True := trivial#eval IO.println "x"\n' + WRONG,
    "run_cmd«»": 'run_cmd«IO».println "x"\n' + WRONG,
    "set_option«»": "set_option«debug».skipKernelTC true in\n" + WRONG,
    "] in a string": '@[deprecated "]", implemented_by g] def f : Nat := 1\n' + WRONG,
    "] in a comment": "@[deprecated /- ] -/, implemented_by g] def f : Nat := 1\n" + WRONG,
    "unknown attribute": "@[my_code_attr] def f : Nat := 1\n" + WRONG,
    "char after a digit": "def b := 1'\"'\n#eval IO.println 1 -- \"\n" + WRONG,
    "char after »": "def «b» := «b»'\"'\n#eval IO.println 1 -- \"\n" + WRONG,
    # found scanning real files: core's `]'` token (`xs[i]'h`) opens no char literal
    "]' before a quote": 'def a := #[1][0]\'"\' \n#check " #eval IO.println 1 -- "\n' + WRONG,
    # found by the lexer fuzzer: `#` and one letter, read as one `#`-word, hid
    # what follows the letter's own token (a raw string, a name with a prime)
    "#r raw string": '#r" :=\\"#eval IO.println 1 --"\n' + WRONG,
    "#s' name": '#s\'"\' "#eval IO.println 1 --"\n' + WRONG,
    # the long fuzzer's find (2026-12-06): where `#align` is no token, Lean reads `#`, the
    # identifier `align'` and a string, and then the `#eval`
    "' after a #-word": "#align'\"' -- \" #eval IO.println 1\n" + WRONG,
    ".r after a #-word": '#align.r#" " #eval IO.println 1 -- "#\n' + WRONG,
    # a hole that does not parse: Lean's recovery reads the rest of the string as code
    "code after a hole": 'def m := s!"{‹.x#⟨} #eval IO.println 1 -- "\n' + WRONG,
    "decide +«native»": "theorem t : 2 + 2 = 5 := by decide +«native»\n",
    "config native": "theorem t : 2 + 2 = 5 := by decide (config := {«native» := true})\n",
}
TACTICS = {
    "run_tac«»": "run_tac«pure» ()",
    "decide +«native»": "decide +«native»",
    "config native": "decide (config := {«native» := true})",
}
NATIVE = ("decide +«native»", "config native")
BRACES = HEADER + 'theorem s : "{" ++ "}" = "{}" := rfl\n'


def test_the_forger_reads_every_cause_as_code():
    for name, text in {**CAUSES, **TACTICS}.items():
        assert code_running(text), name  # else the door test below would prove nothing
    assert not code_running(BRACES)


def _refused(error: ClientError) -> bool:
    return error.code == grpc.StatusCode.INVALID_ARGUMENT and "code policy" in error.details


async def test_every_cause_is_refused_at_every_door(tmp_path):
    log = tmp_path / "fired.jsonl"
    log.write_text("")
    port = free_port()
    config = loopback_config(1, sandbox__mode="off")
    config.repl.command = FORGER + [str(log)]
    config.gateway.http_port = port
    app = await create_server(config)
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    url = f"http://127.0.0.1:{port}"
    texts = [HEADER + t for t in CAUSES.values()]
    try:
        batch = await client.verify_batch(texts, check_axioms=False)
        streamed = await client.verify(texts, check_axioms=False)
        for name, one, two in zip(CAUSES, batch, streamed):
            assert one.status != "VALID" and two.status != "VALID", name
            assert "code policy" in one.error or "native" in one.error, (name, one.error)
        [braces] = await client.verify_batch([BRACES], check_axioms=False)
        assert braces.status == "VALID", braces.error
        # Sessions: opened with the cause, or the cause run in an honest one.
        opened = await client.open_session(HEADER + "def x := 1\n", name="s")
        assert opened.result.status == "VALID"
        # Native evaluation is answered by the axiom rule without running, in sessions
        # as on Verify (issue 41 item 10); every other cause is refused as bad input.
        for name, text in CAUSES.items():
            if name in NATIVE:
                opened_native = await client.open_session(HEADER + text, name="evil")
                ran = await client.run_in_session("s", text, env=0)
                for result in (opened_native.result, ran.result):
                    assert result.status != "VALID" and "native" in result.error, (name, result)
            else:
                with pytest.raises(ClientError) as refused:
                    await client.open_session(HEADER + text, name="evil")
                assert _refused(refused.value), name
                with pytest.raises(ClientError) as refused:
                    await client.run_in_session("s", text, env=0)
                assert _refused(refused.value), name
            in_session = await client.verify_batch([text], session="s")
            assert in_session[0].status != "VALID", name
        # The REST gateway.
        async with aiohttp.ClientSession() as http:
            body = {"snippets": [{"id": str(n), "code": t} for n, t in enumerate(texts)]}
            async with http.post(url + "/api/check", json=body) as response:
                assert response.status == 200
                answers = (await response.json())["results"]
        assert len(answers) == len(texts)
        for answer in answers:
            said = json.dumps(answer)
            assert "code policy" in said or "native_decide / compiler trust" in said, answer
        # StartProof and RunTactic.
        for name, text in CAUSES.items():
            with pytest.raises(ClientError) as refused:
                await client.start_proof(HEADER + text + "theorem u : True := sorry\n")
            assert _refused(refused.value), name
        started = await client.start_proof(HEADER + "theorem t : 2 + 2 = 5 := sorry")
        for name, tactic in TACTICS.items():
            with pytest.raises(ClientError) as refused:
                await client.run_tactic(started.states[0].state_id, tactic)
            assert _refused(refused.value), name
        # Extract runs through the policy too.
        for text in texts:
            try:
                await client.extract(text)
            except ClientError as exc:
                assert exc.code != grpc.StatusCode.INTERNAL
        assert log.read_text() == ""  # the forger never fired
    finally:
        await stop_server(app, client)
