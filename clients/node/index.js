'use strict';
// Node.js client for leanrpc. Loads the contract from proto/ at run time, so
// there is no generated code to keep in sync.

const crypto = require('node:crypto');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_ROOT = process.env.LEANRPC_PROTO_ROOT || path.resolve(__dirname, '..', '..', 'proto');
const HEADER_HASH_KEY = 'x-leanrpc-header-hash';

function loadProto() {
  const definition = protoLoader.loadSync(['leanrpc/v1/verifier.proto'], {
    includeDirs: [PROTO_ROOT],
    keepCase: true,
    longs: Number,
    enums: String, // statuses arrive as names: 'VALID', 'SORRY', ...
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(definition).leanrpc.v1;
}

// Same rule as leanrpc.client.header_hash: sha256 of the snippet's leading
// `import` lines (stripped, joined by '\n'), first 16 hex digits. A balancer
// hashes on it so one header keeps reaching the replicas that hold it warm.
function headerHash(code) {
  const imports = [];
  for (const raw of code.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('--')) continue;
    if (!line.startsWith('import ')) break;
    imports.push(line);
  }
  return crypto.createHash('sha256').update(imports.join('\n'), 'utf8').digest('hex').slice(0, 16);
}

function mostCommonHeaderHash(codes) {
  const counts = new Map();
  let best = '';
  for (const code of codes) {
    const hash = headerHash(code);
    const count = (counts.get(hash) || 0) + 1;
    counts.set(hash, count);
    if (!best || count > counts.get(best)) best = hash;
  }
  return best;
}

class LeanrpcClient {
  constructor(address = '127.0.0.1:50051', { token = '', credentials = null } = {}) {
    const v1 = loadProto();
    this._stub = new v1.Verifier(address, credentials || grpc.credentials.createInsecure());
    this._token = token;
  }

  _metadata(codes = []) {
    const metadata = new grpc.Metadata();
    if (this._token) metadata.set('authorization', `Bearer ${this._token}`);
    if (codes.length) metadata.set(HEADER_HASH_KEY, mostCommonHeaderHash(codes));
    return metadata;
  }

  _unary(method, request, metadata, timeoutS) {
    const options = timeoutS ? { deadline: new Date(Date.now() + timeoutS * 1000) } : {};
    return new Promise((resolve, reject) => {
      this._stub[method](request, metadata, options, (error, response) => (error ? reject(error) : resolve(response)));
    });
  }

  // snippets: [{id, code}]; resolves to results in input order.
  async verifyBatch(snippets, { timeoutS = 0, deadlineS = 0, checkAxioms = false } = {}) {
    const request = { snippets, options: { timeout_s: timeoutS, check_axioms: checkAxioms } };
    const response = await this._unary('Verify', request, this._metadata(snippets.map((s) => s.code)), deadlineS);
    return response.results;
  }

  // One VerifyStream; at most `window` snippets in flight. Results come back
  // in completion order; this returns them in input order.
  verify(snippets, { timeoutS = 0, window = 64 } = {}) {
    return new Promise((resolve, reject) => {
      const call = this._stub.VerifyStream(this._metadata(snippets.map((s) => s.code)));
      const byId = new Map();
      let next = 0;
      let inFlight = 0;
      const pump = () => {
        while (next < snippets.length && inFlight < window) {
          call.write({ snippet: snippets[next++] });
          inFlight++;
        }
        if (next === snippets.length && inFlight === 0) call.end();
      };
      call.on('data', (message) => {
        byId.set(message.result.id, message.result);
        inFlight--;
        pump();
      });
      call.on('error', reject);
      call.on('end', () => {
        const missing = snippets.filter((s) => !byId.has(s.id));
        if (missing.length) reject(new Error(`stream ended without ${missing.length} results`));
        else resolve(snippets.map((s) => byId.get(s.id)));
      });
      call.write({ options: { timeout_s: timeoutS } });
      pump();
    });
  }

  serverInfo() {
    return this._unary('GetServerInfo', {}, this._metadata(), 30);
  }

  close() {
    this._stub.close();
  }
}

const { ProverClient } = require('./prover');

module.exports = { LeanrpcClient, ProverClient, headerHash, HEADER_HASH_KEY, grpc };
