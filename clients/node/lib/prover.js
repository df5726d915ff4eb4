'use strict';
// Prover calls for the Node client (docs/PROVER.md): startProof, runTactic,
// expand (several tactics on one state over the Expand stream), releaseStates.
// Statuses are bare names ('COMPLETED', 'INCOMPLETE', ...), as for verify.
// A result is a proof only when status is COMPLETED: the
// assembled whole proof (proof_text) verified VALID (verification).
// Times are seconds here (timeoutS, ttlS; `elapsed_s` on answers) and
// google.protobuf.Duration on the wire (timeout, ttl, elapsed); 0 leaves a
// request Duration unset (the server default).

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { protoRoot } = require('./proto');
const { duration, seconds } = require('./convert');
const { CHANNEL_OPTIONS } = require('./retry');

// Request fields: a Duration only when seconds are given (unset = server default).
function durations(fields) {
  const out = {};
  for (const [name, secondsValue] of Object.entries(fields)) {
    if (secondsValue) out[name] = duration(secondsValue);
  }
  return out;
}

// An answer with its `elapsed` Duration also as `elapsed_s` (seconds), and
// statuses as bare names ('COMPLETED', the whole-proof check's 'VALID'), the
// convention of the verify calls (lib/convert.js) and of the Python client.
function withSeconds(response) {
  const out = { ...response, elapsed_s: seconds(response.elapsed) };
  if (typeof out.status === 'string') out.status = out.status.replace(/^PROOF_STATUS_/, '');
  if (out.verification && typeof out.verification.status === 'string') {
    out.verification = { ...out.verification, status: out.verification.status.replace(/^STATUS_/, '') };
  }
  return out;
}

function loadProver() {
  const definition = protoLoader.loadSync(['leanrpc/v1/prover.proto'], {
    includeDirs: [protoRoot()],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(definition).leanrpc.v1;
}

class ProverClient {
  constructor(address = '127.0.0.1:50051', { token = '', credentials = null } = {}) {
    const v1 = loadProver();
    // The Verifier client's channel options (lib/retry.js).
    this._stub = new v1.Prover(address, credentials || grpc.credentials.createInsecure(), {
      ...CHANNEL_OPTIONS,
    });
    this._token = token;
    this._expand = null; // the Expand stream, opened by the first expand()
    this._pending = new Map(); // request_id -> {count, results, resolve, reject}
    this._nextRequest = 0;
  }

  _unary(method, request, timeoutS) {
    const metadata = new grpc.Metadata();
    if (this._token) metadata.set('authorization', `Bearer ${this._token}`);
    const options = timeoutS ? { deadline: new Date(Date.now() + timeoutS * 1000) } : {};
    return new Promise((resolve, reject) => {
      this._stub[method](request, metadata, options, (error, response) => (error ? reject(error) : resolve(response)));
    });
  }

  // code with sorries (or a bare statement); resolves to {proof_id, states: [{state_id, goals, start, end}], elapsed_s, ...}
  // checkAxioms: null (the default) leaves it to the server's default (on); false turns it off.
  startProof(code, { timeoutS = 0, ttlS = 0, checkAxioms = null, deadlineS = 0 } = {}) {
    const request = { code, ...durations({ timeout: timeoutS, ttl: ttlS }) };
    if (checkAxioms !== null && checkAxioms !== undefined) request.check_axioms = Boolean(checkAxioms);
    return this._unary('StartProof', request, deadlineS).then(withSeconds);
  }

  // resolves to a TacticResult: {status, state_id, goals, messages, error, proof_text, verification, elapsed_s, ...}
  runTactic(stateId, tactic, { timeoutS = 0, deadlineS = 0 } = {}) {
    const request = { state_id: stateId, tactic, ...durations({ timeout: timeoutS }) };
    return this._unary('RunTactic', request, deadlineS).then(withSeconds);
  }

  // Several tactics on one state, as ONE Expand request on the client's Expand
  // stream (opened at the first call, shared by concurrent calls): the server
  // runs them pipelined on one worker, one fence for all, and sends all the
  // results in one message (pack_results). Resolves to one TacticResult per
  // tactic, in the tactics' order (each with `index` and `elapsed_s`). A bad
  // tactic is a REJECTED result, not an error; the promise rejects only when
  // the stream fails, and then every pending call rejects with that error.
  expand(stateId, tactics, { timeoutS = 0 } = {}) {
    if (!Array.isArray(tactics) || tactics.length === 0) {
      return Promise.reject(new TypeError('expand: tactics must be a non-empty array'));
    }
    const stream = this._expandStream();
    const requestId = String(this._nextRequest++);
    const request = { request_id: requestId, state_id: stateId, ...durations({ timeout: timeoutS }) };
    if (tactics.length === 1) request.tactic = tactics[0];
    else Object.assign(request, { tactics, pack_results: true });
    return new Promise((resolve, reject) => {
      this._pending.set(requestId, { count: tactics.length, results: [], resolve, reject });
      stream.write(request);
    });
  }

  _expandStream() {
    if (this._expand) return this._expand;
    const metadata = new grpc.Metadata();
    if (this._token) metadata.set('authorization', `Bearer ${this._token}`);
    const stream = this._stub.Expand(metadata);
    stream.on('data', (message) => {
      // Packed: the first result carries the others in `more`; a server that
      // predates packing sends one message per tactic.
      for (const one of [message, ...(message.more || [])]) {
        const pending = this._pending.get(one.request_id);
        if (!pending) continue;
        const { more, ...result } = one;
        pending.results.push(withSeconds(result));
        if (pending.results.length === pending.count) {
          this._pending.delete(one.request_id);
          pending.results.sort((a, b) => a.index - b.index);
          pending.resolve(pending.results);
        }
      }
    });
    const fail = (error) => {
      if (this._expand === stream) this._expand = null;
      const pending = [...this._pending.values()];
      this._pending.clear();
      const reason = error || new Error('the Expand stream ended with requests unanswered');
      for (const p of pending) p.reject(reason);
    };
    stream.on('error', fail);
    stream.on('end', () => fail(null));
    this._expand = stream;
    return stream;
  }

  releaseStates({ stateIds = [], proofIds = [] } = {}) {
    return this._unary('ReleaseStates', { state_ids: stateIds, proof_ids: proofIds }, 30);
  }

  close() {
    if (this._expand) {
      const stream = this._expand;
      this._expand = null;
      stream.end();
    }
    this._stub.close();
  }
}

module.exports = { ProverClient };
