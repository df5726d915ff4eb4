"""Prefix routing over the pool trie, the fork's incrementality flag, bounded history."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from leanrpc.config import Config
from leanrpc.core.headers import split_header
from leanrpc.pool.pool import Job, Pool
from leanrpc.worker.worker import WorkerState
from reuse_support import lean_file, standin_command, start, stop


def _variant(tag: str, k: int) -> str:
    return lean_file(30, tag, last=f"theorem {tag}last : {k} + 0 = {k} := rfl")


async def _two_files_on_two_workers(client):
    a0, b0 = await client.verify_batch([("a0", _variant("A", 0)), ("b0", _variant("B", 0))])
    assert a0.status == b0.status == "VALID"
    assert a0.reused_prefix_chars == b0.reused_prefix_chars == 0
    return a0, b0


async def test_variants_go_to_the_worker_that_holds_their_file():
    app, client = await start(workers=2, pool__min_warm=2)
    try:
        assert app.pool.incrementality
        a0, b0 = await _two_files_on_two_workers(client)
        holders = {"A": a0.worker, "B": b0.worker}
        assert holders["A"] != holders["B"]
        prefix = len(split_header(_variant("A", 0)).padded_body.rsplit("theorem Alast", 1)[0])
        for k in range(1, 5):
            for tag in ("A", "B"):
                [r] = await client.verify_batch([_variant(tag, k)])
                assert r.status == "VALID"
                assert r.worker == holders[tag], (tag, k)
                assert r.reused_prefix_chars == prefix
        assert app.pool.stats.prefix_routed == 8
        assert len(app.pool.prefix_index) == 10
    finally:
        await stop(app, client)


async def test_without_the_trie_some_variant_misses_its_prefix():
    app, client = await start(workers=2, pool__min_warm=2, pool__prefix_routing=False)
    try:
        await _two_files_on_two_workers(client)
        reused = []
        for k in range(1, 3):
            for tag in ("A", "B"):
                [r] = await client.verify_batch([_variant(tag, k)])
                reused.append(r.reused_prefix_chars)
        # (the two files share only their blank header lines)
        assert min(reused) <= 2, "most-recently-used routing sends some variant to the other file's worker"
    finally:
        await stop(app, client)


async def test_history_is_bounded_and_goes_with_the_worker():
    app, client = await start(workers=1, pool__prefix_history=2)
    try:
        for k in range(4):
            [r] = await client.verify_batch([_variant(f"F{k}x", k)])
            assert r.status == "VALID"
        [worker] = app.pool.workers
        assert len(worker.history) == 2 and len(app.pool.prefix_index) == 2
        os.kill(worker.pid, signal.SIGKILL)
        for _ in range(200):
            if worker.state is WorkerState.DEAD:
                break
            await asyncio.sleep(0.05)
        assert worker.state is WorkerState.DEAD
        assert len(app.pool.prefix_index) == 0
    finally:
        await stop(app, client)


async def _detected(command, mode="auto", env=None) -> tuple[bool, bool]:
    config = Config()
    config.pool.workers = 1
    config.repl.command = command
    config.repl.incrementality = mode
    config.repl.env = env or {}
    pool = Pool(config)
    await pool.start()
    try:
        return pool.incrementality, pool.elab_async
    finally:
        await pool.close()


async def test_incrementality_detection():
    plain = [sys.executable, "-m", "leanrpc.standin"]
    # the fork is recognised by its answers, not only by its command line
    assert await _detected(plain, env={"LEANRPC_STANDIN_FORK": "1"}) == (True, True)
    assert await _detected(plain) == (False, False)
    assert await _detected(plain + ["--fork", "--lean-version", "4.18.0"]) == (True, False)
    assert await _detected(plain + ["--fork"], mode="off") == (False, False)


async def test_a_job_waits_for_a_busy_worker_holding_a_much_longer_prefix():
    config = Config()
    config.pool.workers = 2
    config.repl.command = standin_command("--fork")
    pool = Pool(config)
    holder, other = pool._spawn_worker(), pool._spawn_worker()
    body = "\n".join(f"theorem t{i} : {i} = {i} := rfl" for i in range(200)) + "\n"
    job = Job(split=split_header("import Mathlib\n" + body + "theorem z : 0 = 0 := rfl\n"), timeout_s=10)
    for worker in (holder, other):
        worker._set_state(WorkerState.IDLE)
        worker.import_key, worker.imports_env = job.import_key, 0
    old = Job(split=split_header("import Mathlib\n" + body), timeout_s=10)
    pool._remember(holder, old, 0)
    pool._observe_cost(1.0, len(old.text))  # measured: a full body costs about 1 s
    holder.mark_busy()
    holder.expected_busy_s = 0.05
    waiting = __import__("collections").Counter()
    assert pool._best_for_prefix([other], job, waiting, holder.busy_since) is None
    assert pool.stats.prefix_waits == 1
    # once it has waited max_wait_for_warm_s it takes the idle worker
    late = holder.busy_since + config.pool.max_wait_for_warm_s + 1
    assert pool._best_for_prefix([other], job, waiting, late) is other
    # and when the holder is idle it is simply the best candidate
    holder.mark_idle()
    assert pool._best_for_prefix([other, holder], job, waiting, late) is holder
    assert holder.reusable_prefix(0, job.text) == len(old.text)
