"""The Node client passes the REPL command options (issue 41) and returns
their answers, against a live server on loopback."""

from __future__ import annotations

import json

from leanrpc.app import create_server
from testkit import loopback_config, node_json

CODE = "import Mathlib\n\ntheorem a : 1 = 1 := by\n  skip\n  rfl\n"

SCRIPT = """
const { LeanrpcClient } = require('.');
const client = new LeanrpcClient(process.argv[1]);
const code = JSON.parse(process.argv[2]);
(async () => {
  const [asked] = await client.verifyBatch([{ id: 'a', code }], { allTactics: true, rootGoals: true });
  const [streamed] = await client.verify([{ id: 's', code }], { allTactics: true });
  const [plain] = await client.verifyBatch([{ id: 'p', code }]);
  let typo = '';
  try { await client.verifyBatch([{ id: 't', code }], { all_tactics: true }); } catch (e) { typo = e.message; }
  client.close();
  console.log(JSON.stringify({ asked, streamed, plain, typo }));
})().catch((e) => { console.error(e); process.exit(1); });
"""


async def test_node_client_asks_for_tactics_and_root_goals(node_client):
    app = await create_server(loopback_config(1))
    try:
        out = await node_json(
            node_client, "-e", SCRIPT, f"127.0.0.1:{app.port}", json.dumps(CODE), timeout=120
        )
    finally:
        await app.stop(2.0)
    asked, streamed, plain = out["asked"], out["streamed"], out["plain"]
    assert asked["status"] == "VALID" and asked["sorries"] == []
    assert [(t["text"], t["start"]["line"], t["goals"]) for t in asked["tactics"]] == [
        ("skip", 4, "⊢ 1 = 1"),
        ("rfl", 5, "⊢ 1 = 1"),
    ]
    assert [(g["start"]["line"], g["start"]["column"]) for g in asked["root_goals"]] == [(3, 21)]
    assert [t["text"] for t in streamed["tactics"]] == ["skip", "rfl"]
    assert plain["tactics"] == [] and plain["root_goals"] == []
    assert "did you mean allTactics?" in out["typo"]
