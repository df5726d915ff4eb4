"""Sessions report the levels Verify reports (issue 41 item 10): `native_decide`
in a session is answered by the axiom rule without running, as Verify answers
it (not an INVALID_ARGUMENT error), and every session result says which checks
ran (`checks.policy`, `checks.axioms`), through the real gRPC door."""

from __future__ import annotations

from leanrpc.app import create_server
from leanrpc.client import AsyncClient
from testkit import loopback_config

NATIVE = "theorem n : 2 + 2 = 4 := by native_decide\n"
PLAIN = "theorem p : 2 + 2 = 4 := by decide\n"


async def test_sessions_answer_native_decide_and_report_levels_as_verify_does():
    app = await create_server(loopback_config(1))
    try:
        async with AsyncClient(f"127.0.0.1:{app.port}", max_retries=0) as client:
            [verified_native, verified_plain] = await client.verify_batch([NATIVE, PLAIN])
            opened = await client.open_session("theorem base : True := trivial\n", name="s")
            assert opened.result.status == "VALID"
            assert opened.result.checks.policy == "proof"
            assert opened.result.checks.axioms == "PASSED"

            native = await client.run_in_session("s", NATIVE, env=0)
            assert native.env is None  # answered without running: no new env
            assert native.result.status == verified_native.status != "VALID"
            assert native.result.axioms == verified_native.axioms == ["Lean.ofReduceBool"]
            assert native.result.checks == verified_native.checks
            assert native.result.checks.policy == "proof"
            assert native.result.checks.axioms == "FAILED"

            plain = await client.run_in_session("s", PLAIN, env=0)
            assert plain.result.status == verified_plain.status == "VALID"
            assert plain.result.checks == verified_plain.checks
            assert (plain.result.checks.policy, plain.result.checks.axioms) == ("proof", "PASSED")

            # Opening a session with native evaluation: the same answer, no session.
            refused = await client.open_session(NATIVE, name="n")
            assert refused.env is None and refused.result.status == verified_native.status
            assert refused.result.checks.axioms == "FAILED"
            # The axiom check off: the levels say so too.
            unchecked = await client.run_in_session("s", PLAIN, env=0, check_axioms=False)
            assert unchecked.result.checks.axioms == "NOT_RUN"
            assert unchecked.result.checks.policy == "proof"
    finally:
        await app.stop(2.0)
