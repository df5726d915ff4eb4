'use strict';
// Verifies 100 snippets through a live leanrpc server and checks every status.
// Usage: node test/verify100.js HOST:PORT   (exit status 0 when all checks pass)

const assert = require('node:assert/strict');
const { LeanrpcClient, grpc } = require('..');

const HEADERS = ['import Mathlib', 'import Mathlib.Tactic'];
const PROOFS = { VALID: 'rfl', SORRY: 'sorry', INVALID: 'exact Nat.nonexistent_lemma x' };
const KINDS = ['VALID', 'SORRY', 'INVALID'];

function snippet(i) {
  const expected = KINDS[i % 3];
  const code = `${HEADERS[i % 2]}\n\ntheorem t${i} (x : Nat) : x + ${i} = x + ${i} := by\n  ${PROOFS[expected]}\n`;
  return { id: `n${i}`, code, expected };
}

async function main() {
  const address = process.argv[2] || '127.0.0.1:50051';
  const client = new LeanrpcClient(address);
  const summary = { streamed: 0, batched: 0, statuses: {} };
  try {
    const info = await client.serverInfo();
    assert.equal(info.verifier.kind, 'stand-in', 'the test server runs the stand-in');

    const all = Array.from({ length: 100 }, (_, i) => snippet(i));
    const streamed = all.slice(0, 70);
    const batched = all.slice(70);
    const results = [
      ...(await client.verify(streamed.map(({ id, code }) => ({ id, code })), { window: 16 })),
      ...(await client.verifyBatch(batched.map(({ id, code }) => ({ id, code })))),
    ];
    summary.streamed = streamed.length;
    summary.batched = batched.length;
    assert.equal(results.length, 100);
    results.forEach((result, i) => {
      assert.equal(result.id, all[i].id);
      assert.equal(result.status, all[i].expected, `${result.id}: ${result.status} ${result.error}`);
      assert.equal(result.verifier.kind, 'stand-in');
      summary.statuses[result.status] = (summary.statuses[result.status] || 0) + 1;
    });

    // Bad input is a gRPC error with INVALID_ARGUMENT, not a result.
    // The rich status says why and which field (google.rpc ErrorInfo, BadRequest).
    await assert.rejects(client.verifyBatch([]), (error) => error.code === grpc.status.INVALID_ARGUMENT
      && error.reason === 'INVALID_REQUEST' && error.fieldViolations.length === 1
      && error.fieldViolations[0].field === 'snippets' && error.retryAfterMs === null);
    summary.empty_batch = 'INVALID_ARGUMENT';
  } finally {
    client.close();
  }
  console.log(JSON.stringify(summary));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
