'use strict';
// Run from a folder where the packed tarball was installed (`npm install
// leanrpc-client-*.tgz`); tests/ecosystem/test_node_package.py copies it there.
// Usage: node installed-check.js MODE HOST:PORT [MAX_RETRIES]
//   verify    30 snippets over VerifyStream + 6 over Verify; checks statuses
//   sessions  sessions and Verify on the server's REPL profile 'legacy'
//   late      one Verify while no server listens yet (prints each retry)
//   overload  a slow snippet then 6 more, window 16 (the server has a tiny queue)
//   partial   two quick snippets then one that hangs (the test stops the server)
//   restart   3,000 snippets; prints {"progress": 100} at the 100th answer (the
//             test then stops the server and starts a new one on the same port)
// Prints one JSON line per event ({"retry": ...}, {"result": ...}) and a last
// JSON line with the outcome.

const assert = require('node:assert/strict');
const { LeanrpcClient, grpc } = require('@leanrpc/client');

const HEADERS = ['import Mathlib', 'import Mathlib.Tactic'];
const PROOFS = { VALID: 'rfl', SORRY: 'sorry', INVALID: 'exact Nat.nonexistent_lemma x' };
const KINDS = ['VALID', 'SORRY', 'INVALID'];
const print = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);

function snippet(i) {
  const expected = KINDS[i % 3];
  const code = `${HEADERS[i % 2]}\n\ntheorem t${i} (x : Nat) : x + ${i} = x + ${i} := by\n  ${PROOFS[expected]}\n`;
  return { id: `p${i}`, code, expected };
}

const ok = (i) => ({ id: `q${i}`, code: `import Mathlib\n\ntheorem q${i} : ${i} = ${i} := rfl\n` });
const brief = (r) => ({ id: r.id, status: r.status, error: r.error, retry_after_ms: r.retry_after_ms, verifier: r.verifier ? r.verifier.kind : null });

async function verify(client) {
  const all = Array.from({ length: 36 }, (_, i) => snippet(i));
  const plain = (list) => list.map(({ id, code }) => ({ id, code }));
  const results = [...(await client.verify(plain(all.slice(0, 30)), { window: 8 })), ...(await client.verifyBatch(plain(all.slice(30))))];
  assert.equal(results.length, all.length);
  results.forEach((r, i) => {
    assert.equal(r.id, all[i].id);
    assert.equal(r.status, all[i].expected, `${r.id}: ${r.status} ${r.error}`);
    assert.equal(r.verifier.kind, 'stand-in');
  });
  await assert.rejects(client.verifyBatch([]), (error) => error.code === grpc.status.INVALID_ARGUMENT);
  // The server's result cache: `cache: false` bypasses it, the default uses it.
  const again = plain([all[0]]);
  const [bypassed] = await client.verifyBatch(again, { cache: false });
  const [streamed] = await client.verify(again, { cache: false });
  const [cached] = await client.verifyBatch(again);
  const sources = [bypassed, streamed, cached].map((r) => r.reuse.cache_source);
  return { results: results.map(brief), info: (await client.serverInfo()).verifier.kind, sources };
}

// Sessions on the server's REPL profile 'legacy' (the test's config): the
// profile is kept for life, another one is refused naming the field.
async function sessions(client) {
  const header = 'import Mathlib\n\ndef double (n : Nat) : Nat := 2 * n\n';
  const opened = await client.openSession(header, { name: 'old', profile: 'legacy' });
  assert.deepEqual([opened.session, opened.env, opened.profile, opened.result.status], ['old', 0, 'legacy', 'VALID']);
  const step = await client.runInSession('old', 'theorem d2 : double 2 = 4 := by decide', { env: 0 });
  assert.deepEqual([step.env, step.profile, step.result.status], [1, 'legacy', 'VALID']);
  const plain = await client.openSession(header);
  assert.equal(plain.profile, '');
  await assert.rejects(client.runInSession(plain.session, '#check double', { profile: 'legacy' }), (error) =>
    error.code === grpc.status.INVALID_ARGUMENT && error.fieldViolations.some((v) => v.field === 'options.profile'));
  const [onLegacy] = await client.verifyBatch([{ id: 'l', code: `${header}theorem t : 1 = 1 := rfl\n` }], { profile: 'legacy' });
  assert.equal(onLegacy.status, 'VALID');
  const closed = [await client.closeSession('old'), await client.closeSession('old')];
  return {
    versions: [opened.result.verifier.lean_version, step.result.verifier.lean_version, plain.result.verifier.lean_version,
      onLegacy.verifier.lean_version],
    closed,
  };
}

const MODES = {
  verify,
  sessions,
  late: async (client) => ({ results: (await client.verifyBatch([snippet(0), snippet(1), snippet(2)])).map(brief) }),
  overload: async (client) => {
    const slow = { id: 'slow', code: 'import Mathlib\n\ntheorem s : True := trivial\n--@standin: burn=1\n' };
    const items = [slow, ...Array.from({ length: 6 }, (_, i) => ok(i))];
    return { results: (await client.verify(items, { window: 16 })).map(brief) };
  },
  partial: async (client) => {
    const hang = { id: 'hang', code: 'import Mathlib\n\ntheorem h : True := trivial\n--@standin: hang\n' };
    const results = await client.verify([ok(0), ok(1), hang], { window: 1, onResult: (r) => print({ result: brief(r) }) });
    return { results: results.map(brief) };
  },
  restart: async (client) => {
    const items = Array.from({ length: 3000 }, (_, i) => ({
      id: `r${i}`, code: `import Mathlib\n\n--@standin: burn=0.005\ntheorem r${i} : True := trivial\n`,
    }));
    let answered = 0;
    const onResult = () => { if (++answered === 100) print({ progress: answered }); };
    const results = await client.verify(items, { onResult });
    return {
      count: results.length, answered, statuses: [...new Set(results.map((r) => r.status))],
      inOrder: results.every((r, i) => r.id === `r${i}`),
    };
  },
};

async function main() {
  const [mode, address, retries] = process.argv.slice(2);
  const client = new LeanrpcClient(address, {
    maxRetries: retries === undefined ? 5 : Number(retries),
    backoffMs: 50,
    onRetry: ({ attempt, delayMs, code, resent }) => print({ retry: attempt, delayMs, code: grpc.status[code] || null, resent }),
  });
  try {
    print({ mode, ok: true, ...(await MODES[mode](client)) });
  } catch (error) {
    if (!error.partial) throw error;
    print({ mode, ok: false, code: grpc.status[error.code], details: error.details, partial: error.partial.map(brief) });
  } finally {
    client.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
