"""Issue 41 item 13: an unknown REPL profile is one convention in the Python
and Node clients (docs/CLIENTS.md): the streaming verify answers each snippet
REJECTED naming the profile; the unary batch raises INVALID_ARGUMENT naming
the field `options.profile`. Both clients against one live server."""

from __future__ import annotations

import json

from eco_support import start_app
from leanrpc.client import AsyncClient, ClientError
from testkit import node_json

CODE = "theorem t : 1 = 1 := rfl"

_NODE = """
const { LeanrpcClient } = require('.');
(async () => {
  const client = new LeanrpcClient(process.argv[1]);
  const out = {};
  for (const method of ['verify', 'verifyBatch']) {
    try {
      const results = await client[method]([{ id: 'a', code: %s }], { profile: 'nope' });
      out[method] = { results: results.map((r) => [r.status, r.error]) };
    } catch (error) {
      out[method] = { code: error.code, fields: (error.fieldViolations || []).map((v) => v.field) };
    }
  }
  client.close();
  console.log(JSON.stringify(out));
})();
"""


async def _python(address: str) -> dict:
    out = {}
    async with AsyncClient(address, max_retries=0) as client:
        for name, method in (("verify", client.verify), ("verifyBatch", client.verify_batch)):
            try:
                results = await method([("a", CODE)], profile="nope")
                out[name] = {"results": [[r.status, r.error] for r in results]}
            except ClientError as exc:
                out[name] = {
                    "code": exc.code.value[0],
                    "fields": [field for field, _why in exc.field_violations],
                }
    return out


async def test_both_clients_answer_an_unknown_profile_alike(node_client):
    app = await start_app(workers=1)
    try:
        address = f"127.0.0.1:{app.port}"
        python = await _python(address)
        node = await node_json(node_client, "-e", _NODE % json.dumps(CODE), address, timeout=120)
    finally:
        await app.stop(2.0)
    [[status, error]] = python["verify"]["results"]
    assert status == "REJECTED" and "unknown REPL profile 'nope'" in error
    assert python["verifyBatch"] == {"code": 3, "fields": ["options.profile"]}  # INVALID_ARGUMENT
    assert node == python
