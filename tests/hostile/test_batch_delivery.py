"""Issue 26 item 2, "a result is delivered only after nothing newer can poison
its worker", where the exchange order allows it: Verify sends the body and its
`#print axioms` check in one exchange (the check's lines in the body's own
command, repl/trailing.py; they were one pipelined batch before) with one fence
and one /proc audit at its end. A thread the body left behind that is caught by
that audit poisons the worker, and the body's own answer (VALID on its own) is
never delivered."""

from __future__ import annotations

from hostile_support import HEADER, start_service
from leanrpc.results import Status
from leanrpc.services.verify import VerifyOptions
from testkit import wait_until

GOOD = "theorem t : True := trivial\n"


async def test_a_thief_caught_by_the_batchs_audit_withholds_the_bodys_answer():
    service = await start_service(workers=1, pool__max_retries=0)
    try:
        result = await service.verify(
            "a",
            HEADER + GOOD + "--@hostile: steal\n",
            VerifyOptions(timeout_s=20, check_axioms=True),
        )
        assert result.status is Status.CRASH and "poisoned" in result.error, (
            result.status,
            result.error,
        )
        await wait_until(
            lambda: service.pool.stats.restarts["poisoned"] == 1, 10, "the poisoned worker's end"
        )
    finally:
        await service.pool.close(2.0)


async def test_the_same_batch_without_the_thief_is_valid():
    """The control: this fake answers the body and its axiom check in one exchange."""
    service = await start_service(workers=1, pool__max_retries=0)
    try:
        result = await service.verify(
            "a", HEADER + GOOD, VerifyOptions(timeout_s=20, check_axioms=True)
        )
        assert result.status is Status.VALID and result.axioms_checked, result.error
        [worker] = service.pool.workers
        channel = worker._channel
        before = channel.exchanges  # the worker's boot and header, and the first body
        again = await service.verify(
            "b", HEADER + GOOD.replace(" t ", " u "), VerifyOptions(timeout_s=20, check_axioms=True)
        )
        assert again.status is Status.VALID and again.axioms_checked, again.error
        # The body and its #print axioms: one command, one fence, one audit.
        assert channel.batches == 0 and channel.exchanges == before + 1
    finally:
        await service.pool.close(2.0)


async def test_a_bodys_own_answer_never_stands_for_its_unanswered_check():
    """The body asks `#print axioms t` itself (answered, clean, on its own line) and its
    check, on the lines after it in the same command, gets no answer: the body's
    answer is the body's (repl/trailing.py), so the check is missing, never VALID."""
    service = await start_service(workers=1, pool__max_retries=0)
    try:
        code = HEADER + GOOD + "#print axioms t\n--@hostile: mute-after\n"
        result = await service.verify("a", code, VerifyOptions(timeout_s=20, check_axioms=True))
        assert result.status is Status.REJECTED, (result.status, result.error)
        assert "no answer for t" in result.error
        # The same body whose check is answered is VALID: the test can fail.
        plain = HEADER + GOOD + "#print axioms t\n"
        result = await service.verify("b", plain, VerifyOptions(timeout_s=20, check_axioms=True))
        assert result.status is Status.VALID and result.axioms_checked, result.error
    finally:
        await service.pool.close(2.0)
