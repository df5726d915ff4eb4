"""Issue 41 item 4: in the sandbox, a REPL's own death is reported as it was.

The REPL runs as PID 2 of its PID namespace under enter.py's init, so a
signal it sends itself (Lean's abort(), a kill) ends it as anywhere else, and
the monitor mirrors the REPL's status, not the init's. Real workers on the
stand-in, sandbox on, crash retries off: each cause reaches the result.
"""

from __future__ import annotations

import asyncio
import os
import signal

import psutil

from leanrpc.pool.pool import Pool
from leanrpc.security.sandbox import UnshareLauncher, make_sandbox_launcher
from leanrpc.services.verify import VerifyOptions, VerifyService
from security_support import HEADER, make_config, proc_status, repl_pid
from testkit import wait_until

CAUSES = [
    ("kill", "(killed by SIGKILL)"),
    ("abort", "(killed by SIGABRT)"),
    ("segv", "(killed by SIGSEGV)"),
    ("exit", "(exit status 1)"),
]


async def _sandboxed_service() -> VerifyService:
    config = make_config(sandbox__mode="unshare", pool__max_retries=0)
    launcher = make_sandbox_launcher(config)
    assert isinstance(launcher, UnshareLauncher), launcher.describe()
    pool = Pool(config, launcher)
    await pool.start()
    return VerifyService(pool, config)


async def _verify(service: VerifyService, body: str, timeout_s: float = 30.0):
    return await service.verify("s", HEADER + body, VerifyOptions(timeout_s=timeout_s))


async def test_each_crash_directive_is_reported_with_its_own_cause():
    service = await _sandboxed_service()
    try:
        for directive, words in CAUSES:
            result = await _verify(
                service, f"theorem t : True := trivial\n--@standin: crash={directive}\n"
            )
            assert result.status.name == "CRASH", (directive, result.error)
            assert words in result.error, (directive, result.error)
            for other in {w for _, w in CAUSES} - {words}:
                assert other not in result.error, (directive, result.error)
        after = await _verify(service, "theorem after : True := trivial\n")
        assert after.status.name == "VALID", after.error
    finally:
        await service.pool.close(2.0)


async def test_the_repl_is_pid_2_under_an_init_that_forwards_sigterm():
    service = await _sandboxed_service()
    pool = service.pool
    try:
        # Nothing else runs on this process first: its crash is the job's (pool/runner.py).
        await wait_until(lambda: any(w.pid for w in pool.workers), 30.0, "a started worker")
        (worker,) = [w for w in pool.workers if w.pid]
        (init,) = psutil.Process(worker.pid).children()
        repl = repl_pid(worker)
        assert proc_status(init.pid)["NSpid"].split()[-1] == "1"
        assert proc_status(repl)["NSpid"].split()[-1] == "2"
        assert proc_status(init.pid)["Seccomp"].strip() == "2", "the init is filtered too"
        # The init keeps nothing of the REPL's pipes: stdin and stdout are /dev/null.
        for fd in (0, 1):
            assert os.readlink(f"/proc/{init.pid}/fd/{fd}") == "/dev/null"
        job = asyncio.ensure_future(
            _verify(service, "theorem h : True := trivial\n--@standin: hang\n", timeout_s=60)
        )
        await wait_until(lambda: worker.busy, 30.0, "the hanging request to be sent")
        await asyncio.sleep(0.5)
        os.kill(init.pid, signal.SIGTERM)  # delivered to an init only through its handler
        result = await asyncio.wait_for(job, 30)
        assert result.status.name == "CRASH", result.error
        assert "(killed by SIGTERM)" in result.error, result.error
    finally:
        await pool.close(2.0)
