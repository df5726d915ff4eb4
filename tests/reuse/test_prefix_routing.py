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
        for state in (WorkerState.PROBING, WorkerState.READY, WorkerState.IDLE):  # as if booted
            worker._set_state(state)
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


def _pool_with_busy_holder(expected_busy_s: float):
    """Two fake workers on one header; `holder` is busy and holds a 200-line
    prefix of `job`, `other` is idle and holds nothing. A full body measured
    1.3 s and a 50-character edit 0.3 s: 1 s of text plus 0.3 s overhead."""
    config = Config()
    config.pool.workers = 2
    config.repl.command = standin_command("--fork")
    pool = Pool(config)
    holder, other = pool._spawn_worker(), pool._spawn_worker()
    body = "\n".join(f"theorem t{i} : {i} = {i} := rfl" for i in range(200)) + "\n"
    job = Job(split=split_header("import Mathlib\n" + body + "theorem z : 0 = 0 := rfl\n"), timeout_s=10)
    for worker in (holder, other):
        for state in (WorkerState.PROBING, WorkerState.READY, WorkerState.IDLE):  # as if booted
            worker._set_state(state)
        worker.import_key, worker.imports_env = job.import_key, 0
    old = Job(split=split_header("import Mathlib\n" + body), timeout_s=10)
    pool._remember(holder, old, 0)
    pool._observe_cost(1.3, len(old.text))
    pool._observe_cost(0.3, 50)
    holder.mark_busy()
    holder.expected_busy_s = expected_busy_s
    return pool, holder, other, job


def _cleanup(pool) -> None:
    if pool._recheck is not None:
        pool._recheck.cancel()
    pool._queue.clear()


def test_the_cost_model_keeps_the_per_request_overhead_out_of_the_per_character_cost():
    from leanrpc.pool.cost import BodyCostModel

    model = BodyCostModel()
    model.observe(1.3, 6000)  # a whole file: 1 s of text + 0.3 s overhead
    for k in range(60):       # then many short edits, mostly overhead
        model.observe(0.3 + (k % 3) * 0.01, 50 + k % 5)
    assert 0.8 < model.per_char * 6000 < 1.2, "the whole file still costs about 1 s of text"
    assert 0.2 < model.overhead_s < 0.4
    # a time / chars ratio would price the 6000-character prefix at ~36 s
    assert model.seconds(6000) < 2.0


async def test_a_job_takes_the_idle_worker_when_the_holder_is_far_from_done():
    pool, holder, other, job = _pool_with_busy_holder(expected_busy_s=5.0)
    try:
        waiting = __import__("collections").Counter()
        assert pool._best_for_prefix([other], job, waiting, holder.busy_since + 0.1) is other
        assert pool.stats.prefix_waits == 0 and pool.stats.prefix_spreads == 1
        # a holder past its estimate is expected to overrun by as much again
        pool2, holder2, other2, job2 = _pool_with_busy_holder(expected_busy_s=0.2)
        assert pool2._best_for_prefix([other2], job2, waiting, holder2.busy_since + 0.1) is None
        assert pool2._best_for_prefix([other2], job2, waiting, holder2.busy_since + 1.5) is other2
        _cleanup(pool2)
    finally:
        _cleanup(pool)


async def test_waiting_rent_spreads_a_hot_prefix_to_the_idle_worker():
    pool, holder, other, job = _pool_with_busy_holder(expected_busy_s=0.3)
    try:
        waiting = __import__("collections").Counter()
        t0 = holder.busy_since
        pool._queue.append(job)
        assert pool._best_for_prefix([other], job, waiting, t0) is None
        assert pool.stats.prefix_waits == 1 and job.wait_mark == t0
        # it waited 0.8 s with `other` idle, and the holder took another request
        pool._accrue_rent(t0 + 0.8)
        assert abs(pool.stats.prefix_wait_s - 0.8) < 1e-9
        holder.busy_since = t0 + 0.8
        # 0.3 s more + 0.8 s already paid >= 1 s of text: elaborate it on `other`
        assert pool._best_for_prefix([other], job, __import__("collections").Counter(), t0 + 0.8) is other
        assert pool.stats.prefix_spreads == 1 and pool.stats.prefix_waits == 1
        assert not pool._prefix_rent, "the rent is paid off: the prefix now has two holders"
    finally:
        _cleanup(pool)


async def test_a_text_being_elaborated_counts_as_held_and_goes_if_the_request_fails():
    app, client = await start(workers=2, pool__min_warm=2)
    try:
        await client.verify_batch([_variant("W", 0)])  # measure the costs first
        def h_entries() -> int:
            return sum(1 for key in app.pool.prefix_index if "theorem Hl0" in key)

        hung = asyncio.ensure_future(
            client.verify_batch([_variant("H", 0) + "--@standin: hang\n"], timeout_s=1.0)
        )
        for _ in range(400):
            if any(w.busy for w in app.pool.workers):
                break
            await asyncio.sleep(0.01)
        assert h_entries() == 1, "the in-flight text is indexed for its worker"
        [result] = await hung
        assert result.status == "TIMEOUT"
        assert h_entries() == 0, "a failed request leaves no index entry"
    finally:
        await stop(app, client)
