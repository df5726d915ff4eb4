"""The Node client's `expand` (clients/node/lib/prover.js): several tactics on one state as ONE
Expand request with packed results, over one stream that concurrent calls share; results in
the tactics' order; a bad tactic is a REJECTED result, not an error. Real gRPC, a live server
on loopback with stand-in workers, the Node client as a user runs it."""

from __future__ import annotations

import pytest

from prover_support import AND_STATEMENT, running_server
from testkit import node_json

pytestmark = pytest.mark.timeout(180)

SCRIPT = """
const { ProverClient } = require('./lib/prover');
(async () => {
  const client = new ProverClient(process.argv[1]);
  const proof = await client.startProof(process.argv[2], { timeoutS: 30 });
  const root = proof.states[0].state_id;
  // Two calls at once on the one stream: a batch of five, and a single tactic.
  const [batch, single] = await Promise.all([
    client.expand(root, ['constructor', 'frobnicate', '', 'intro h', 'constructor'], { timeoutS: 30 }),
    client.expand(root, ['constructor']),
  ]);
  const next = await client.expand(batch[4].state_id, ['exact hp', 'exact hq']);
  let bad = null;
  try { await client.expand(root, []); } catch (error) { bad = error.name; }
  client.close();
  const brief = (r) => [r.index, r.tactic, r.status, r.goals.length, r.parent_state_id === root,
                        r.state_id, r.elapsed_s >= 0, r.more === undefined];
  console.log(JSON.stringify({ root, batch: batch.map(brief), single: single.map(brief),
                               next: next.map((r) => [r.tactic, r.status]), bad }));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def _batches(app) -> int:
    return sum(w._channel.batches for w in app.pool.workers)


async def test_node_expand_sends_one_packed_request_per_call_and_orders_the_results(node_client):
    async with running_server(1) as (app, _client):
        before = _batches(app)
        out = await node_json(
            node_client, "-e", SCRIPT, f"127.0.0.1:{app.port}", AND_STATEMENT, timeout=150
        )
        batch = out["batch"]
        assert [row[:2] for row in batch] == [
            [0, "constructor"],
            [1, "frobnicate"],
            [2, ""],
            [3, "intro h"],
            [4, "constructor"],
        ]
        statuses = [row[2] for row in batch]
        assert statuses[0] == statuses[4] == "INCOMPLETE"
        assert statuses[1] == "ERROR"
        assert statuses[2] == "REJECTED"  # refused before any REPL saw it
        assert batch[0][3] == batch[4][3] == 2  # each ran on the root itself
        assert all(row[4] and row[6] and row[7] for row in batch)  # parent, elapsed_s, no `more`
        assert batch[0][5] != batch[4][5]
        assert out["single"][0][2] == "INCOMPLETE"
        # The new states go on: the second call's two tactics closed one goal each.
        assert out["next"] == [
            ["exact hp", "INCOMPLETE"],
            ["exact hq", "INCOMPLETE"],
        ]
        assert out["bad"] == "TypeError"
        # Two requests of several tactics: two pipelined batches on the worker.
        assert _batches(app) == before + 2
