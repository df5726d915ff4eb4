"""check_axioms is on by default for every client: the Node client leaves the
field unset unless asked (it used to send `check_axioms: false` on every call,
so Node callers got VALID for a proof by `axiom cheat : False`)."""

from __future__ import annotations

import pytest

from testkit import node_json
from verify_support import running_server

pytestmark = pytest.mark.timeout(240)

CHEAT = "import Mathlib\n\naxiom cheat : False\n\ntheorem t : 2 + 2 = 5 := cheat.elim\n"
SCRIPT = """
const { LeanrpcClient } = require('.');
(async () => {
  const client = new LeanrpcClient(process.argv[1]);
  const code = process.argv[2];
  const plain = await client.verifyBatch([{ id: 'a', code }]);
  const streamed = await client.verify([{ id: 'b', code }]);
  const off = await client.verifyBatch([{ id: 'c', code }], { checkAxioms: false });
  console.log(JSON.stringify([plain[0].status, streamed[0].status, off[0].status]));
  client.close();
})().catch((error) => { console.error(error); process.exit(1); });
"""


async def test_the_node_client_leaves_the_axiom_check_to_the_server(node_client):
    async with running_server() as (_app, _client):
        statuses = await node_json(
            node_client, "-e", SCRIPT, f"127.0.0.1:{_app.port}", CHEAT, timeout=120
        )
        # Default (unset): the server's default, on. Explicitly off: the control.
        assert statuses == ["REJECTED", "REJECTED", "VALID"]


PIN_SCRIPT = """
const { LeanrpcClient } = require('.');
(async () => {
  const client = new LeanrpcClient(process.argv[1]);
  const [reference, good, changed] = process.argv.slice(2);
  const results = await client.verifyBatch([{ id: 'g', code: good, reference }, { id: 'c', code: changed, reference }]);
  console.log(JSON.stringify(results.map((r) => [r.status, r.reference && r.reference.reason])));
  client.close();
})().catch((error) => { console.error(error); process.exit(1); });
"""


async def test_the_node_client_pins_a_snippet_to_its_reference(node_client):
    """Issue 25 item 2's API: the Node client takes a `reference` per snippet."""
    reference = "import Mathlib\n\ntheorem t : 2 + 2 = 4 := by\n  sorry\n"
    good = "import Mathlib\n\ntheorem t : 2 + 2 = 4 := by\n  norm_num\n"
    changed = "import Mathlib\n\ntheorem t : 2 + 2 = 5 := by\n  norm_num\n"
    async with running_server() as (app, _client):
        assert await node_json(
            node_client,
            "-e",
            PIN_SCRIPT,
            f"127.0.0.1:{app.port}",
            reference,
            good,
            changed,
            timeout=120,
        ) == [
            ["VALID", ""],
            ["INVALID", "STATEMENT_MISMATCH"],
        ]
