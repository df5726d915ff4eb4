"""Prefix routing over the pool trie, the fork's incrementality flag, bounded history.

Routing decisions themselves are tested without processes in tests/pool/test_routing_plan.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from leanrpc.config import Config
from leanrpc.core.headers import split_header
from leanrpc.pool import Pool
from leanrpc.worker.worker import WorkerState
from reuse_support import lean_file, start, stop


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
        assert min(reused) <= 2, (
            "most-recently-used routing sends some variant to the other file's worker"
        )
    finally:
        await stop(app, client)


async def test_history_is_bounded_and_goes_with_the_worker():
    app, client = await start(workers=1, pool__prefix_history=2)
    try:
        for k in range(4):
            [r] = await client.verify_batch([_variant(f"F{k}x", k)])
            assert r.status == "VALID"
        [worker] = app.pool.workers
        assert (
            app.pool.prefix_index.history_size(worker.name) == 2 and len(app.pool.prefix_index) == 2
        )
        os.kill(worker.pid, signal.SIGKILL)
        for _ in range(200):
            if worker.state is WorkerState.DEAD and not len(app.pool.prefix_index):
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


def test_the_cost_model_keeps_the_per_request_overhead_out_of_the_per_character_cost():
    from leanrpc.pool.cost import BodyCostModel

    model = BodyCostModel()
    model.observe(1.3, 6000)  # a whole file: 1 s of text + 0.3 s overhead
    for k in range(60):  # then many short edits, mostly overhead
        model.observe(0.3 + (k % 3) * 0.01, 50 + k % 5)
    assert 0.8 < model.per_char * 6000 < 1.2, "the whole file still costs about 1 s of text"
    assert 0.2 < model.overhead_s < 0.4
    # a time / chars ratio would price the 6000-character prefix at ~36 s
    assert model.seconds(6000) < 2.0


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
