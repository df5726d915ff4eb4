"""Code that got past the policy stalls a later command (issue 38 item 6, the rider-timeout rule).

The REPL is tests/hostile/trapdoor_repl.py in `stall-after-trap` mode: an honest stand-in
until a command holding `TRAPDOOR` is answered (code that got past the policy), after which
the command that follows it (the trap's own `#print axioms` rides in the trap's command,
repl/trailing.py) is held longer than the time limit, as a thread the trap left behind
parking the REPL's main loop.
That command times out, and whoever sent it is answered TIMEOUT, since a timeout during a
body's own commands is that body's (pool/pipeline.py `Group.owner`, as for a lone job).

The group is made certain, not left to timing: the one worker is held on a gated command
(the REPL's `gate=` mode) until the eight bodies are queued.

What must hold (docs/SECURITY.md, "Pipelined bodies"):
* In the trap's own group, the stall costs at most two honest siblings a TIMEOUT: the
  rider it hit, and the first job after the trap's run alone. The bodies answered before the
  timed-out rider (the trap among them) run again ALONE, so the trap never again leads or
  rides a group whose later bodies it could stall one after another (before this rule, every
  new group of the requeued bodies lost one more sibling to the same trap).
* No wrong proof is VALID, and every snippet gets exactly one answer.
* Another client never pays: its canary (before a worker that served one client serves
  another) is the command that stalls, the worker is replaced without a verdict, and the
  other client's job runs on a fresh process with its true verdict.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cache_support import theorem
from canary_support import WRONG, serving, trapdoor_config
from testkit import TRAPDOOR, queued_behind_gate

pytestmark = pytest.mark.timeout(240)

LIMIT_S = 2.0  # the snippets' time limit; the stall holds a command three times as long


def _config(tmp_path, log: Path, pipeline_bodies: int):
    # Only the canary before another client's job, with a limit of its own (a minute by default).
    gate = tmp_path / "gate"
    command = [*TRAPDOOR, f"stall-after-trap={3 * LIMIT_S}:1", f"log={log}", f"gate={gate}"]
    config = trapdoor_config(tmp_path, command, rate=0.0, timeout_s=LIMIT_S)
    config.pool.pipeline_bodies = pipeline_bodies
    config.pool.pipeline_group_s = 3600.0  # only the count bounds the group, on any machine
    return config


async def test_a_stall_left_in_a_group_times_out_at_most_two_siblings(tmp_path, monkeypatch):
    log = tmp_path / "trap.log"
    config = _config(tmp_path, log, pipeline_bodies=8)
    async with serving(config, monkeypatch) as (app, (alice, _bob)):
        truth = {f"s{i}": "VALID" if i % 2 else "INVALID" for i in range(8)}
        codes = [(sid, theorem(i, "rfl" if i % 2 else WRONG)) for i, sid in enumerate(truth)]
        codes[3] = ("s3", theorem(3) + "-- TRAPDOOR\n")
        # The one worker is held (another limit: it takes no riders) until all eight are
        # queued, so they form one group whatever the machine's speed, and the command
        # after the trap, the one that stalls, is a rider's.
        hold = [("hold", theorem(99) + "-- GATE\n")]
        held, results = await queued_behind_gate(
            app.pool,
            log,
            tmp_path / "gate",
            alice.verify(hold, timeout_s=10 * LIMIT_S),
            alice.verify(codes, timeout_s=LIMIT_S),
            len(codes),
        )
        assert [r.status for r in held] == ["VALID"]
        stats = app.pool.stats
    assert [r.id for r in results] == list(truth)  # exactly one answer each
    assert stats.pipelined_rider_timeouts == 1, stats  # the stall hit the rider after the trap
    # The queue's order among the eight is the order their checks finished in, so the rider
    # after the trap is read from the REPL's own log: each stalled command names its theorem.
    stalled = [f"s{i}" for i in re.findall(r"stalled '(?:\\n)*theorem t(\d+) ", log.read_text())]
    timed_out = [r.id for r in results if r.status == "TIMEOUT"]
    assert 1 <= len(stalled) <= 2 and sorted(timed_out) == sorted(stalled), (stalled, timed_out)
    for r in results:
        if r.id not in timed_out:
            assert r.status == truth[r.id], (r.id, r.status, r.error)
    assert all(r.status != "VALID" for r in results if truth[r.id] == "INVALID")


async def test_another_clients_canary_takes_the_stall_and_its_job_runs_fresh(tmp_path, monkeypatch):
    log = tmp_path / "trap.log"
    config = _config(tmp_path, log, pipeline_bodies=1)
    async with serving(config, monkeypatch) as (app, (alice, bob)):
        [trap] = await alice.verify([("trap", theorem(7) + "-- TRAPDOOR\n")], timeout_s=LIMIT_S)
        assert trap.status == "VALID" and "stall armed" in log.read_text()
        # The next command on that process is bob's canary: it stalls, and is lost.
        [other] = await bob.verify([("other", theorem(9, WRONG))], timeout_s=LIMIT_S)
        assert "stalled" in log.read_text()
        stats = app.pool.runner.canaries.stats
        assert stats.lost == 1 and stats.sent == 1, stats
        assert (other.status, other.worker != trap.worker) == ("INVALID", True), other.error
        [mine] = await bob.verify([("mine", theorem(10))], timeout_s=LIMIT_S)
        assert mine.status == "VALID"
