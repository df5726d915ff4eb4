"""A trainer-like client process (no server in it): scores, forks a child that scores
with its own channel, then scores again; prints the three reward lists as JSON.
Run by tests/rewards/test_core.py as `python fork_client.py ADDRESS`."""

from __future__ import annotations

import json
import multiprocessing
import sys

from leanrpc.rewards import Problem, RewardCore

P = Problem("theorem add_comm' (a b : ℕ) : a + b = b + a := by\n")
COMPLETIONS = ["```lean\n  omega\n```", "```lean\n  exact Nat.nonexistent_lemma a b\n```"]


def score(address: str) -> list:
    core = RewardCore(server=address, deadline_s=30)
    return [d.reward for d in core.score_sync(COMPLETIONS, [P, P])]


if __name__ == "__main__":
    address = sys.argv[1]
    before = score(address)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = pool.apply(score, (address,))
    print(json.dumps([before, child, score(address)]))
