'use strict';
// Prover calls for the Node client (docs/PROVER.md): startProof, runTactic,
// releaseStates. Statuses arrive as names ('PROOF_STATUS_COMPLETED', ...).
// A result is a proof only when status is PROOF_STATUS_COMPLETED: the
// assembled whole proof (proof_text) verified VALID (verification).
// Times are seconds here (timeoutS, ttlS; `elapsed_s` on answers) and
// google.protobuf.Duration on the wire (timeout, ttl, elapsed); 0 leaves a
// request Duration unset (the server default).

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { protoRoot } = require('./proto');
const { duration, seconds } = require('./convert');

// Request fields: a Duration only when seconds are given (unset = server default).
function durations(fields) {
  const out = {};
  for (const [name, secondsValue] of Object.entries(fields)) {
    if (secondsValue) out[name] = duration(secondsValue);
  }
  return out;
}

// An answer with its `elapsed` Duration also as `elapsed_s` (seconds).
function withSeconds(response) {
  return { ...response, elapsed_s: seconds(response.elapsed) };
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
    this._stub = new v1.Prover(address, credentials || grpc.credentials.createInsecure());
    this._token = token;
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

  releaseStates({ stateIds = [], proofIds = [] } = {}) {
    return this._unary('ReleaseStates', { state_ids: stateIds, proof_ids: proofIds }, 30);
  }

  close() {
    this._stub.close();
  }
}

module.exports = { ProverClient };
