"""Under the `proof` code policy no input at any door makes code-running
text reach a REPL. The REPL here is hostile (tests/policy/forging_repl.py):
whatever code-running text it receives it answers VALID, as code on the
REPL's main thread could, and logs it. Under `proof` the log stays empty and
every attack is refused; under `trusted` the same attack runs (and is VALID:
the test can fail)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import aiohttp
import grpc
import pytest

from leanrpc.app import create_server
from leanrpc.client import AsyncClient, ClientError
from testkit import free_port, loopback_config, stop_server

FAKE = [sys.executable, str(Path(__file__).with_name("forging_repl.py"))]
HEADER = "import Mathlib\n\n"
GOOD = HEADER + "theorem ok : True := trivial\n"
WRONG = "theorem two_plus_two : 2 + 2 = 5 := bad_proof\n"
ATTACKS = [
    WRONG + '#eval IO.println "forged"',
    WRONG + "run_cmd pure ()",
    "theorem t : 2 + 2 = 5 := by\n  run_tac pure ()\n  exact bad_proof",
    WRONG + 'elab "forge" : command => pure ()',
    "@[implemented_by bad] def f : Nat := 1\n" + WRONG,
    "set_option debug.skipKernelTC true in\n" + WRONG,
    "theorem t : 2 + 2 = 5 := by native_decide",
]


async def _start(tmp_path, *repl_args, **overrides):
    log = tmp_path / "fired.jsonl"
    log.write_text("")
    port = free_port()
    config = loopback_config(1, sandbox__mode="off", **overrides)  # the log file is the test's
    config.repl.command = FAKE + [str(log), *repl_args]
    config.gateway.http_port = port
    app = await create_server(config)
    return app, AsyncClient(f"127.0.0.1:{app.port}", max_retries=0), log, f"http://127.0.0.1:{port}"


def _team_only():
    """A REPL profile only a client with the token "team" may name."""
    import hashlib

    from leanrpc.config import ReplProfile

    return ReplProfile(clients=["token:" + hashlib.sha256(b"team").hexdigest()[:16]])


def _fired(log: Path) -> list[str]:
    return [json.loads(line) for line in log.read_text().splitlines()]


async def test_no_door_lets_code_reach_the_repl_under_proof(tmp_path):
    app, client, log, url = await _start(tmp_path)
    try:
        # Verify (batch): the attacks are REJECTED one by one, the good snippet runs.
        results = await client.verify_batch(
            [GOOD] + [HEADER + a for a in ATTACKS], check_axioms=False
        )
        assert results[0].status == "VALID" and results[0].checks.policy == "proof"
        for attack, result in zip(ATTACKS, results[1:]):
            assert result.status == "REJECTED", attack
            assert "code policy `proof`" in result.error and result.checks.policy == "proof"
        # VerifyStream.
        streamed = await client.verify([HEADER + a for a in ATTACKS], check_axioms=False)
        assert [r.status for r in streamed] == ["REJECTED"] * len(ATTACKS)
        # With the axiom check on, native evaluation gets the axiom check's answer, without running it.
        native = (await client.verify_batch([HEADER + ATTACKS[-1]], check_axioms=True))[0]
        assert (
            native.status != "VALID"
            and "Lean.ofReduceBool" in native.axioms
            and "native_decide" in native.error
        )
        assert native.checks.axioms == "FAILED"
        # Sessions: opening with code, a session command, Verify(session=...).
        with pytest.raises(ClientError) as refused:
            await client.open_session(HEADER + ATTACKS[0], name="evil")
        assert (
            refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
            and "code policy" in refused.value.details
        )
        opened = await client.open_session(HEADER + "def x := 1\n", name="s")
        assert opened.result.status == "VALID"
        with pytest.raises(ClientError) as refused:
            await client.run_in_session("s", ATTACKS[1], env=0)
        assert (
            refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
            and "run_cmd at line 2" in refused.value.details
        )
        in_session = await client.verify_batch([ATTACKS[0]], session="s")
        assert in_session[0].status == "REJECTED"
        # Extract runs through Verify: no REPL sees it either.
        try:
            await client.extract(HEADER + ATTACKS[0])
        except ClientError as exc:
            assert exc.code != grpc.StatusCode.INTERNAL
        # Prover: StartProof code and every tactic.
        with pytest.raises(ClientError) as refused:
            await client.start_proof(HEADER + "#eval IO.println 1\ntheorem t : True := sorry")
        assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
        started = await client.start_proof(HEADER + "theorem t : True := sorry")
        with pytest.raises(ClientError) as refused:
            await client.run_tactic(started.states[0].state_id, "run_tac pure ()")
        assert (
            refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
            and "run_tac" in refused.value.details
        )
        # The REST gateway.
        async with aiohttp.ClientSession() as http:
            body = {
                "snippets": [{"id": f"a{n}", "code": HEADER + a} for n, a in enumerate(ATTACKS)]
            }
            async with http.post(url + "/api/check", json=body) as response:
                assert response.status == 200
                answers = (await response.json())["results"]
        assert len(answers) == len(ATTACKS)
        # Each refused by the policy (native evaluation: the axiom check's answer, never run).
        assert all(
            "code policy" in json.dumps(a) or "native_decide / compiler trust" in json.dumps(a)
            for a in answers
        ), answers
        # Across every door, the hostile REPL never saw code-running text.
        assert _fired(log) == []
    finally:
        await stop_server(app, client)


@pytest.mark.runs_user_code
async def test_trusted_runs_the_callers_code_and_says_so(tmp_path):
    app, client, log, _url = await _start(tmp_path, policy__default="trusted")
    try:
        results = await client.verify_batch([HEADER + ATTACKS[0]], check_axioms=False)
        # The forging REPL answered for it: exactly what `trusted` cannot promise.
        assert results[0].status == "VALID" and results[0].checks.policy == "trusted"
        assert _fired(log) != []
    finally:
        await stop_server(app, client)


async def test_a_trusted_client_is_named_in_config_not_in_the_request(tmp_path):
    app, client, log, _url = await _start(
        tmp_path, policy__trusted_profiles=["nope"], repl__profiles={"nope": _team_only()}
    )
    try:
        # Nothing in a request can ask for `trusted`: the same call stays `proof`, and
        # naming the trusted profile is refused (tests/policy/test_profile_access.py).
        result = (await client.verify_batch([HEADER + ATTACKS[1]], check_axioms=False))[0]
        assert result.status == "REJECTED" and result.checks.policy == "proof"
        with pytest.raises(ClientError, match="PERMISSION_DENIED"):
            await client.verify_batch([HEADER + ATTACKS[1]], check_axioms=False, profile="nope")
        assert app.service.policy.of("nope") == "trusted" and app.service.policy.of("") == "proof"
        assert _fired(log) == []
    finally:
        await stop_server(app, client)


async def test_with_the_cache_on_the_policy_answers_first_and_trusted_results_are_never_stored(
    tmp_path,
):
    app, client, log, _url = await _start(tmp_path, cache__enabled=True)
    try:
        for _ in range(2):
            result = (await client.verify_batch([HEADER + ATTACKS[0]], check_axioms=False))[0]
            assert result.status == "REJECTED" and result.cache_source == ""
        good = [(await client.verify_batch([GOOD]))[0] for _ in range(2)]
        assert (
            good[1].cache_source == "memory" and good[1].checks.policy == "proof"
        )  # the cache is on
        assert _fired(log) == []
    finally:
        await stop_server(app, client)
    app, client, log, _url = await _start(tmp_path, cache__enabled=True, policy__default="trusted")
    try:
        runs = [(await client.verify_batch([GOOD]))[0] for _ in range(2)]
        assert [r.cache_source for r in runs] == ["", ""]  # a trusted result is the caller's own
        assert all(r.checks.policy == "trusted" for r in runs)
    finally:
        await stop_server(app, client)


# References are elaborated on a REPL too (once, then their answers cached):
# one that installs code would run it on the `#check` the statement check
# sends, and native evaluation would run its compiled code.
CODE_REFERENCES = [
    HEADER + "@[command_elab Lean.Parser.Command.check] def e : Lean.Elab.Command.CommandElab := "
    "fun _ => pure ()\n\ntheorem t : True := by\n  sorry\n",
    HEADER
    + "@[tactic Lean.Parser.Tactic.simp] def s : Lean.Elab.Tactic.Tactic := fun _ => pure ()\n\n"
    "theorem t : True := by\n  sorry\n",
    HEADER + "theorem helper : 2 + 2 = 4 := by native_decide\n\ntheorem t : True := by\n  sorry\n",
    HEADER + "set_option debug.skipKernelTC true in\ntheorem t : True := by\n  sorry\n",
]


async def test_a_reference_that_runs_code_is_refused_at_every_door(tmp_path):
    app, client, log, url = await _start(tmp_path)
    snippet = HEADER + "theorem t : True := trivial\n"
    try:
        for reference in CODE_REFERENCES:
            with pytest.raises(ClientError) as refused:  # Verify: the call, naming the snippet
                await client.verify_batch([snippet], references=[reference])
            assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT, refused.value.details
            assert "snippet 0" in refused.value.details
            assert "the reference may only state declarations" in refused.value.details
            [streamed] = await client.verify(
                [snippet], references=[reference]
            )  # a stream: that snippet
            assert (
                streamed.status == "REJECTED"
                and "the reference may only state declarations" in streamed.error
            )
            async with aiohttp.ClientSession() as http:
                body = {"snippets": [{"id": "r", "code": snippet, "reference": reference}]}
                async with http.post(url + "/api/check", json=body) as response:
                    assert response.status == 422, await response.text()
                    assert "the reference may only state declarations" in await response.text()
        # The same statement without the code is taken (this fake REPL answers
        # no pp.all query, so the pin itself cannot pass here; tests/reference pins).
        [pinned] = await client.verify_batch(
            [snippet], references=[HEADER + "theorem t : True := by\n  sorry\n"]
        )
        assert pinned.reference is not None and "may only state declarations" not in pinned.error
        assert _fired(log) == []
    finally:
        await stop_server(app, client)


@pytest.mark.runs_user_code
async def test_a_worker_that_ran_a_trusted_clients_code_never_serves_another_client(tmp_path):
    """`trusted_clients` on a shared profile: the trusted client's code ran in
    the REPL process and may have left something behind (here: the REPL keeps
    forging VALID afterwards), so that worker is retired after the job and a
    `proof` client's wrong proof is elaborated on a clean one."""
    import hashlib

    trusted_id = "token:" + hashlib.sha256(b"trusted-token").hexdigest()[:16]
    app, _client, log, _url = await _start(
        tmp_path,
        "sticky",
        server__auth_tokens=["trusted-token", "proof-token"],
        policy__trusted_clients=[trusted_id],
        # No canary drawn at random: in a full CI run (2026-12-05) rate canaries
        # poisoned w1 and w2 within 120 ms and a trusted job was answered CRASH
        # (fail closed, but not what this test is about; which worker state the
        # canary met is not pinned down: see the stop's note).
        canary__rate=0.0,
    )
    trusted = AsyncClient(f"127.0.0.1:{app.port}", token="trusted-token", max_retries=0)
    honest = AsyncClient(f"127.0.0.1:{app.port}", token="proof-token", max_retries=0)
    try:
        for n in range(3):
            [run] = await trusted.verify_batch([HEADER + ATTACKS[0]], check_axioms=False)
            assert (
                run.status == "VALID"
                and run.checks.policy == "trusted"
                and len(_fired(log)) == n + 1
            )
            [wrong] = await honest.verify_batch([HEADER + WRONG], check_axioms=False)
            assert wrong.checks.policy == "proof"
            assert wrong.status == "INVALID", (n, wrong.status, wrong.worker, run.worker)
            assert wrong.worker != run.worker
        # The same through the trusted client's session: its code ran, the worker goes.
        opened = await trusted.open_session(HEADER + ATTACKS[0], name="mine")
        assert opened.result.status == "VALID"
        [wrong] = await honest.verify_batch([HEADER + WRONG], check_axioms=False)
        assert wrong.status == "INVALID" and wrong.worker != opened.result.worker
        again = await trusted.run_in_session("mine", "theorem u : True := trivial", env=0)
        assert again.result.status == "VALID"  # replayed on a fresh worker, retired again after
    finally:
        await trusted.close()
        await honest.close()
        await stop_server(app, _client)
