"""A failed job's error carries its attempt count (issue 42 item 1): the
services read `exc.attempts`, never the job. No processes: the pool is built,
never started, and fails a job by hand as the runner and the dispatcher do."""

from __future__ import annotations

import asyncio

from leanrpc.config import Config
from leanrpc.core.headers import split_header
from leanrpc.errors import WorkerCrashed
from leanrpc.pool import BodyJob
from leanrpc.pool.pool import Pool
from leanrpc.pool.ticket import Ticket


async def test_the_error_a_job_is_failed_with_carries_its_attempts():
    pool = Pool(Config())
    job = BodyJob(split=split_header("import Mathlib\ntheorem x : True := trivial\n"), timeout_s=5)
    ticket = Ticket(job, asyncio.get_running_loop().create_future(), 0.0)
    ticket.attempts = 2  # the pool's count, on its ticket: the job is frozen
    error = WorkerCrashed("killed by SIGKILL")
    assert error.attempts == 0  # not failed yet
    pool.fail(ticket, error)
    assert ticket.future.exception() is error and error.attempts == 2
