"""The runner gives a worker back before it answers the worker's job (issue 28).

The process side of test_attempt_table.py's RUNNING -> GIVEN_BACK walk: the
table shows the worker is given back once; this shows when, against the answer.

The plan that hands the worker its next job then runs ahead of the answer's conversion and
sending, so the REPL waits less between two commands. Checked where the order shows: the
instant the first job's caller resumes with its answer, the command of the job queued behind
it is already on its way to the REPL (the worker RUNNING it); when the worker went back only
after the answer, the next job had only reserved it by then.
"""

from __future__ import annotations

import asyncio

from leanrpc.worker.worker import WorkerState
from testkit import start_service, verify


async def test_the_next_job_is_dispatched_before_the_answer_reaches_its_caller():
    service = await start_service(workers=1)
    pool = service.pool
    try:
        warm = await verify(service, "theorem w : True := trivial\n")
        assert warm.status.name == "VALID"
        seen = {}

        async def first() -> None:
            result = await verify(
                service, "theorem a : True := by\n  trivial\n--@standin: burn=0.2\n", snippet_id="a"
            )
            # Resumed by the answer: nothing else of the loop has run in between but
            # what was scheduled before it.
            seen["status"] = result.status.name
            seen["queued"] = len(pool.admission)
            seen["states"] = [w.state for w in pool.workers]

        running = asyncio.ensure_future(first())
        await asyncio.sleep(0.05)  # the only worker is busy with "a"
        second = asyncio.ensure_future(
            verify(service, "theorem b : True := trivial\n", snippet_id="b")
        )
        await asyncio.sleep(0.01)
        assert len(pool.admission) == 1  # "b" waits for the worker
        await running
        assert seen["status"] == "VALID"
        assert seen["queued"] == 0
        assert seen["states"] == [WorkerState.RUNNING], "b's command waited for a's answer"
        assert (await second).status.name == "VALID"
    finally:
        await pool.close(2.0)
