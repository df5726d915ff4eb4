"""Issue 38 item 6: a Verify batch's bodies pipelined on one worker (pool/pipeline.py).

Over real gRPC on the stand-in: the same batch gives the same results pipelined
and one body per exchange; every snippet gets exactly one answer; a body that
crashes its REPL, or hangs, in the middle of a group is answered alone, and
the others keep their own verdicts. The forging REPL mid-group is in
tests/hostile/test_pipelined_forgers.py.
"""

from __future__ import annotations

from testkit import TRAPDOOR, queued_behind_gate
from verify_support import running_server

HEADER = "import Mathlib\n\n"
STANDARD = ["Classical.choice", "Quot.sound", "propext"]
_ANY_S = 3600.0  # pool.pipeline_group_s: only the count bounds a group, on any machine


def _batch() -> list[tuple[str, str]]:
    """16 snippets of one header with known verdicts (the stand-in's)."""
    snippets = []
    for i in range(16):
        kind = i % 5
        if kind == 0:
            code = f"theorem ok{i} (a b : Nat) : a + b = b + a := by\n  rw [Nat.add_comm]\n"
        elif kind == 1:
            code = f"theorem bad{i} : 1 = 2 := by\n  exact Nat.unknown_lemma_{i}\n"
        elif kind == 2:
            code = f"theorem todo{i} (n : Nat) : n = n := by\n  sorry\n"
        elif kind == 3:
            code = f"axiom cheat{i} : False\n\ntheorem own{i} : 1 = 2 := cheat{i}.elim\n"
        else:
            code = f"namespace N{i}\n\nexample : 2 + 2 = 4 := by\n  norm_num\n\nend N{i}\n"
        snippets.append((f"s{i}", HEADER + code))
    return snippets


def _view(result) -> tuple:
    messages = tuple((m.severity, m.line, m.column, m.text) for m in result.messages)
    return (result.id, result.status, tuple(result.axioms), result.error, messages)


async def test_a_pipelined_batch_answers_as_one_body_per_exchange():
    snippets = _batch()
    async with running_server(1, pool__pipeline_bodies=1) as (app, client):
        alone = await client.verify_batch(snippets)
        assert app.pool.stats.pipelined_groups == 0
    async with running_server(1, pool__pipeline_bodies=16, pool__pipeline_group_s=_ANY_S) as (
        app,
        client,
    ):
        piped = await client.verify_batch(snippets)
        stats = app.pool.stats
        # Nothing ran alone, and the 15 queued behind the first rode with a lead.
        assert stats.pipelined_groups >= 1 and stats.pipelined_bodies >= 8, stats
        assert stats.pipelined_alone == 0 and stats.retries == 0
        [worker] = app.pool.workers
        assert worker._channel.batches < 16  # fewer fenced exchanges than bodies
    assert [_view(r) for r in piped] == [_view(r) for r in alone]
    # Exactly one answer each, in order, with the verdicts the stand-in gives.
    assert [r.id for r in piped] == [sid for sid, _ in snippets]
    statuses = {r.id: r.status for r in piped}
    for i in range(16):
        expected = ["VALID", "INVALID", "SORRY", "REJECTED", "VALID"][i % 5]
        assert statuses[f"s{i}"] == expected, (i, piped[i].status, piped[i].error)
    assert piped[0].axioms == STANDARD


async def test_a_crash_in_the_middle_of_a_group_is_charged_to_its_own_body():
    snippets = _batch()[:8]
    crasher = 5
    sid, code = snippets[crasher]
    snippets[crasher] = (sid, code + "--@standin: crash=kill\n")
    async with running_server(
        1, pool__pipeline_bodies=8, pool__pipeline_group_s=_ANY_S, pool__max_retries=1
    ) as (app, client):
        results = await client.verify_batch(snippets)
        stats = app.pool.stats
        assert stats.pipelined_groups >= 1
        # The group's bodies went again alone, uncharged.
        assert stats.pipelined_alone >= 1
    assert [r.id for r in results] == [sid for sid, _ in snippets]
    for i, result in enumerate(results):
        if i == crasher:
            assert result.status == "CRASH", (result.status, result.error)
        else:
            expected = ["VALID", "INVALID", "SORRY", "REJECTED", "VALID"][i % 5]
            assert result.status == expected, (i, result.status, result.error)


async def test_a_timeout_in_the_middle_of_a_group_is_its_own_bodys():
    """The hanging rider is answered with the timeout it ran into in the group (its
    timer started when the body before it answered: the REPL was its alone), not
    run alone to hang a second time. The bodies answered before it go again alone (one
    of them may have left what stalled it: tests/canary/test_stall_after_trap.py); the
    ones after it never ran, and go again as they were, in a group."""
    snippets = _batch()[:6]
    hanger = 3
    sid, code = snippets[hanger]
    snippets[hanger] = (sid, code + "--@standin: hang\n")
    async with running_server(1, pool__pipeline_bodies=6, pool__pipeline_group_s=_ANY_S) as (
        app,
        client,
    ):
        results = await client.verify_batch(snippets, timeout_s=2.0)
        stats = app.pool.stats
        assert stats.pipelined_groups >= 2  # the first, broken by the hang; then the two after it
        assert stats.pipelined_alone == hanger  # the bodies before the hang, lead included
        assert stats.pipelined_rider_timeouts == 1
        assert stats.restarts["timeout"] == 1  # the hang was waited out once
        assert stats.jobs_submitted == 6 and stats.retries == 0
    assert [r.id for r in results] == [sid for sid, _ in snippets]
    assert results[hanger].attempts == 1
    for i, result in enumerate(results):
        if i == hanger:
            assert result.status == "TIMEOUT", (result.status, result.error)
        else:
            expected = ["VALID", "INVALID", "SORRY", "REJECTED", "VALID"][i % 5]
            assert result.status == expected, (i, result.status, result.error)


async def _group_shape(tmp_path, group_s: float) -> tuple[int, int]:
    """(groups, bodies pipelined) of five bodies of at least 0.15 s each, all queued behind
    a held first body of the same cost (tests/hostile/trapdoor_repl.py `gate=`: the one
    worker answers it once the five wait, so they are one stream's queue on any machine)."""
    gate, log = tmp_path / f"gate-{group_s}", tmp_path / f"log-{group_s}"
    overrides = {
        "repl__command": [*TRAPDOOR, f"gate={gate}", f"log={log}"],
        "sandbox__mode": "off",
        "pool__pipeline_bodies": 16,
        "pool__pipeline_group_s": group_s,
    }
    slow = "--@standin: burn=0.15\n"
    held = [("held", HEADER + "theorem h : True := trivial\n" + slow + "-- GATE\n")]
    bodies = [(f"s{i}", HEADER + f"theorem t{i} : True := trivial\n" + slow) for i in range(5)]
    async with running_server(1, **overrides) as (app, client):
        first, rest = await queued_behind_gate(
            app.pool,
            log,
            gate,
            client.verify_batch(held, timeout_s=120),
            client.verify_batch(bodies, timeout_s=60),
            len(bodies),
        )
        results = [*first, *rest]
        stats = app.pool.stats
    assert [r.status for r in results] == ["VALID"] * 6, [(r.status, r.error) for r in results]
    return stats.pipelined_groups, stats.pipelined_bodies


async def test_slow_bodies_ride_in_groups_no_longer_than_the_group_time(tmp_path):
    """`pool.pipeline_group_s` bounds a group by its bodies' expected REPL time (the pool's
    body cost model, which has seen the held body take at least 0.15 s), not only by their
    count: at 0.35 s they ride at most two to a group, where the count alone puts all five
    in one."""
    groups, bodies = await _group_shape(tmp_path, 0.35)
    assert bodies <= 2 * groups, (groups, bodies)
    assert await _group_shape(tmp_path, _ANY_S) == (1, 5)
