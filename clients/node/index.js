'use strict';
// Node.js client for leanrpc. Owns: the channel, unary calls with retry, and
// `verify` over VerifyStream (bounded window, input order kept, re-sends of
// refused snippets, results already received kept). May import: lib/proto,
// lib/retry, lib/convert, @grpc/grpc-js. The contract travels inside the package (proto/),
// loaded at run time, so there is no generated code to keep in sync.

const crypto = require('node:crypto');
const grpc = require('@grpc/grpc-js');
const { loadVerifier, richDetails } = require('./lib/proto');
const {
  COMMAND_OPTIONS, commandOptions, resultFromPb, sessionResultFromPb, verifyOptions, checkSnippets, checkOptions,
} = require('./lib/convert');
const {
  CHANNEL_OPTIONS,
  MAX_BACKOFF_MS,
  backoffMs,
  isRetryable,
  resendHintMs,
  sleep,
} = require('./lib/retry');

const HEADER_HASH_KEY = 'x-leanrpc-header-hash';

// The header-hash rule defined in proto/leanrpc/v1/verifier.proto (and
// tested against proto/leanrpc/v1/header_hash_vectors.json): sha256 of the
// snippet's leading `import` lines (stripped, joined by '\n'), first 16 hex
// digits. A balancer hashes on it so one header keeps reaching the replicas
// that hold it warm.
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

// A call that failed after the retries. `code` is the gRPC status number
// (compare with grpc.status.*); `partial` holds, for `verify`, the results
// received before the failure, in input order. From the server's rich status
// (google.rpc.Status): `reason` (ErrorInfo: 'OVERLOADED', 'INVALID_REQUEST',
// ...), `fieldViolations` (BadRequest: [{field, description}]) and
// `retryAfterMs` (RetryInfo; null if none).
class LeanrpcError extends Error {
  constructor(code, details, { partial = [], cause = null } = {}) {
    super(`${grpc.status[code] || code}: ${details}`);
    this.name = 'LeanrpcError';
    this.code = code;
    this.details = details;
    this.partial = partial;
    this.cause = cause;
    this.metadata = cause && cause.metadata ? cause.metadata : null;
    const rich = richDetails(cause);
    this.reason = rich.reason;
    this.fieldViolations = rich.fieldViolations;
    this.retryAfterMs = rich.retryAfterMs;
  }
}

function asLeanrpcError(error, partial = []) {
  if (error instanceof LeanrpcError) {
    error.partial = partial;
    return error;
  }
  const code = typeof error.code === 'number' ? error.code : grpc.status.UNKNOWN;
  return new LeanrpcError(code, error.details || error.message, { partial, cause: error });
}

class LeanrpcClient {
  // maxRetries: UNAVAILABLE / RESOURCE_EXHAUSTED calls and refused snippets are
  // tried again up to this many times, waiting backoffMs * 2^(attempt-1) with
  // jitter (the server's hint is a floor). onRetry({attempt, delayMs, code,
  // details, resent}) is called before each wait (logging, progress).
  constructor(
    address = '127.0.0.1:50051',
    { token = '', credentials = null, maxRetries = 5, backoffMs: baseBackoffMs = 200, onRetry = null, channelOptions = {} } = {},
  ) {
    const v1 = loadVerifier();
    this._stub = new v1.Verifier(address, credentials || grpc.credentials.createInsecure(), {
      ...CHANNEL_OPTIONS, // lib/retry.js: a short reconnect backoff, a connection of its own
      ...channelOptions,
    });
    this._token = token;
    this._maxRetries = maxRetries;
    this._backoffMs = baseBackoffMs;
    this._onRetry = onRetry;
  }

  _metadata(codes = []) {
    const metadata = new grpc.Metadata();
    if (this._token) metadata.set('authorization', `Bearer ${this._token}`);
    if (codes.length) metadata.set(HEADER_HASH_KEY, mostCommonHeaderHash(codes));
    return metadata;
  }

  async _pause(attempt, hintMs, error, resent = 0) {
    const delayMs = backoffMs(this._backoffMs, attempt, hintMs, error);
    if (this._onRetry) {
      this._onRetry({ attempt, delayMs, code: error ? error.code : null, details: error ? error.details : '', resent });
    }
    await sleep(delayMs);
  }

  _unaryOnce(method, request, metadata, deadlineS) {
    const options = deadlineS ? { deadline: new Date(Date.now() + deadlineS * 1000) } : {};
    return new Promise((resolve, reject) => {
      this._stub[method](request, metadata, options, (error, response) => (error ? reject(error) : resolve(response)));
    });
  }

  async _unary(method, request, metadata, deadlineS) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this._unaryOnce(method, request, metadata, deadlineS);
      } catch (error) {
        if (!isRetryable(error) || attempt > this._maxRetries) throw asLeanrpcError(error);
        await this._pause(attempt, 0, error);
      }
    }
  }

  // snippets: [{id, code, reference?}] (`reference`: the statement to pin
  // to, header + declarations proved by `sorry`); resolves to results in input order (one unary Verify).
  // `profile` names the server's REPL profile (toolchain); '' is its default.
  // `cache: false` bypasses the server's result cache (null: its default).
  // `allTactics`, `rootGoals`, `declarations`: the REPL's command options
  // (results' `tactics`, `root_goals`, `declarations_json`).
  async verifyBatch(snippets, opts = {}) {
    checkSnippets(snippets, 'verifyBatch');
    checkOptions(opts, ['timeoutS', 'deadlineS', 'checkAxioms', 'profile', 'cache', ...COMMAND_OPTIONS], 'verifyBatch');
    const { timeoutS = 0, deadlineS = 0, checkAxioms = null, profile = '', cache = null } = opts;
    const request = { snippets, options: verifyOptions({ timeoutS, checkAxioms, profile, cache, ...commandOptions(opts) }) };
    const response = await this._unary('Verify', request, this._metadata(snippets.map((s) => s.code)), deadlineS);
    return response.results.map(resultFromPb);
  }

  // Verifies any number of snippets over VerifyStream, at most `window` in
  // flight; resolves to results in input order. A stream that breaks with
  // UNAVAILABLE is opened again for the snippets not yet answered; snippets
  // answered REJECTED with a retry hint (`retry_after_ms`: queue full, server
  // shutting down) never ran and are re-sent after the backoff (at least the
  // hint). After maxRetries those REJECTED results
  // are the answers; a failed stream rejects with a LeanrpcError whose
  // `partial` holds the results received. onResult(result) sees each final
  // result as it arrives.
  async verify(snippets, opts = {}) {
    checkSnippets(snippets, 'verify');
    checkOptions(opts, ['timeoutS', 'window', 'checkAxioms', 'onResult', 'profile', 'cache', ...COMMAND_OPTIONS], 'verify');
    const {
      timeoutS = 0, window = 64, checkAxioms = null, onResult = null, profile = '', cache = null,
    } = opts;
    // Keys are unique even when ids repeat; results get their own id back.
    const keys = snippets.map((s, n) => `${n}:${s.id}`);
    const byKey = new Map(keys.map((key, n) => [key, snippets[n]]));
    const results = new Map();
    const accept = (key, result) => {
      result.id = byKey.get(key).id;
      results.set(key, result);
      if (onResult) onResult(result);
    };
    const inOrder = () => keys.filter((key) => results.has(key)).map((key) => results.get(key));
    const options = verifyOptions({ timeoutS, checkAxioms, profile, cache, ...commandOptions(opts) });
    let attempt = 0;
    while (results.size < snippets.length) {
      const todo = keys.filter((key) => !results.has(key)).map((key) => ({ id: key, code: byKey.get(key).code, reference: byKey.get(key).reference || '' }));
      const resend = new Map();
      try {
        await this._streamOnce(todo, options, window, accept, resend);
      } catch (error) {
        attempt++;
        if (!isRetryable(error) || attempt > this._maxRetries) throw asLeanrpcError(error, inOrder());
        await this._pause(attempt, 0, error);
        continue;
      }
      if (resend.size) {
        attempt++;
        if (attempt > this._maxRetries) {
          for (const [key, { result }] of resend) accept(key, result); // out of retries: final
        } else {
          const hintMs = Math.max(...[...resend.values()].map(({ hintMs: ms }) => ms));
          await this._pause(attempt, hintMs, null, resend.size);
        }
      }
    }
    return inOrder();
  }

  // One VerifyStream for `todo`: final results go to accept(key, result),
  // refused-unrun ones into `resend`. Rejects with the stream's gRPC error.
  _streamOnce(todo, options, window, accept, resend) {
    return new Promise((resolve, reject) => {
      const call = this._stub.VerifyStream(this._metadata(todo.map((s) => s.code)));
      const pending = new Set(todo.map((s) => s.id));
      let next = 0;
      let inFlight = 0;
      let settled = false;
      const pump = () => {
        while (!settled && next < todo.length && inFlight < window) {
          call.write({ snippet: todo[next++] });
          inFlight++;
        }
        if (!settled && next === todo.length && inFlight === 0) call.end();
      };
      call.on('data', (message) => {
        const result = resultFromPb(message.result);
        if (!pending.delete(result.id)) return; // not ours (cannot happen with a correct server)
        inFlight--;
        const hintMs = resendHintMs(result);
        if (hintMs === null) accept(result.id, result);
        else resend.set(result.id, { result, hintMs });
        pump();
      });
      call.on('error', (error) => {
        settled = true;
        reject(error);
      });
      call.on('end', () => {
        if (settled) return;
        settled = true;
        if (pending.size) {
          // The server answers every snippet it read: these it never read (it
          // stopped reading to shut down). A broken stream: re-sent after backoff.
          reject(new LeanrpcError(grpc.status.UNAVAILABLE, `stream ended with ${pending.size} snippets unread`));
        } else resolve();
      });
      call.write({ options });
      pump();
    });
  }

  // Sessions (docs/REUSE.md): a named tree of envs on one header. openSession
  // runs the header (+ shared preamble) as env 0 on REPL profile `profile`
  // ('' = the server's default), which the session keeps for life.
  async openSession(code, { name = '', timeoutS = 0, deadlineS = 0, profile = '' } = {}) {
    const request = { name, code, options: verifyOptions({ timeoutS, profile }) };
    return sessionResultFromPb(await this._unary('OpenSession', request, this._metadata([code]), deadlineS));
  }

  // Runs commands (no imports) on session env `env` (null: env 0). A `profile`
  // other than '' must be the session's own (else INVALID_ARGUMENT).
  async runInSession(session, code, { env = null, timeoutS = 0, deadlineS = 0, profile = '' } = {}) {
    const request = { session, code, options: verifyOptions({ timeoutS, profile }) };
    if (env !== null && env !== undefined) request.env = env;
    return sessionResultFromPb(await this._unary('RunInSession', request, this._metadata(), deadlineS));
  }

  async closeSession(session) {
    const response = await this._unary('CloseSession', { session }, this._metadata(), 30);
    return Boolean(response.closed);
  }

  serverInfo() {
    return this._unary('GetServerInfo', {}, this._metadata(), 30);
  }

  close() {
    this._stub.close();
  }
}

const { ProverClient } = require('./lib/prover');

module.exports = {
  LeanrpcClient, LeanrpcError, ProverClient, headerHash, resendHintMs, backoffMs, MAX_BACKOFF_MS, HEADER_HASH_KEY, grpc,
};
