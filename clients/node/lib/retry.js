'use strict';
// When and how long the client waits before trying again; the same rules as
// the Python client's _retry.py. Owns: which gRPC codes are retried, which
// per-snippet REJECTED results are re-sent (queue full, server shutting down)
// and the backoff with the server's hint as a floor. May import: @grpc/grpc-js.

const { status } = require('@grpc/grpc-js');

const RETRYABLE_CODES = new Set([status.UNAVAILABLE, status.RESOURCE_EXHAUSTED]);
// How VerifyStream answers a snippet the full queue refused (status REJECTED).
const OVERLOADED_PREFIX = 'RESOURCE_EXHAUSTED: ';
// How the server answers, on shutdown, each accepted snippet it did not run.
const SHUTTING_DOWN_PREFIX = 'server shutting down';
// Both carry the same hint form at the end: "...; retry after N ms".
const RETRY_HINT = /retry after (\d+) ms\s*$/;

// Milliseconds to wait before re-sending this snippet, or null if the result
// is final. A REJECTED result is re-sendable when the server refused it for
// overload or because it was shutting down: the snippet never ran.
function resendHintMs(result) {
  if (result.status !== 'REJECTED') return null;
  const error = result.error || '';
  if (!error.startsWith(OVERLOADED_PREFIX) && !error.startsWith(SHUTTING_DOWN_PREFIX)) return null;
  const hint = RETRY_HINT.exec(error);
  return hint ? Number(hint[1]) : 0;
}

function isRetryable(error) {
  return RETRYABLE_CODES.has(error && error.code);
}

// Exponential backoff with jitter (x0.5 .. x1.5). The server's retry-after
// hint (argument, or the `retry-after-ms` trailer of a gRPC error) is a floor,
// and the backoff makes sure a long overload is not hammered at the hint's pace.
function backoffMs(baseMs, attempt, hintMs = 0, error = null) {
  const trailer = error && error.metadata ? error.metadata.get('retry-after-ms') : [];
  for (const value of trailer) hintMs = Math.max(hintMs, Number(value) || 0);
  return Math.max(hintMs, baseMs * 2 ** (attempt - 1) * (0.5 + Math.random()));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

module.exports = { RETRYABLE_CODES, OVERLOADED_PREFIX, SHUTTING_DOWN_PREFIX, resendHintMs, isRetryable, backoffMs, sleep };
