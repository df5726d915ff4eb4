'use strict';
// When and how long the client waits before trying again; the same rules as
// the Python client's _retry.py. Owns: which gRPC codes are retried, which
// per-snippet REJECTED results are re-sent (those with a retry hint: queue
// full, server shutting down) and the backoff with the server's hint as a
// floor; and the channel options both clients (Verifier and Prover) connect with,
// their connection's own reconnect backoff among them. May import: @grpc/grpc-js,
// lib/proto.

const { status } = require('@grpc/grpc-js');

const { richDetails } = require('./proto');

const RETRYABLE_CODES = new Set([status.UNAVAILABLE, status.RESOURCE_EXHAUSTED]);

// Every client's channel: a server that comes back is noticed within a second,
// not after the channel's own reconnect backoff has grown to minutes; and each
// client owns its connection (grpc-js otherwise shares one per address, and its
// backoff, among all channels with the same options).
const CHANNEL_OPTIONS = Object.freeze({
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1000,
  'grpc.use_local_subchannel_pool': 1,
});

// Milliseconds to wait before re-sending this snippet, or null if the result
// is final. A REJECTED result is re-sendable when the server says so with
// `retry_after` (lib/convert.js: `retry_after_ms`): the snippet never ran
// (queue full, or the server was shutting down).
function resendHintMs(result) {
  if (result.status !== 'REJECTED') return null;
  return result.retry_after_ms === undefined ? null : result.retry_after_ms;
}

function isRetryable(error) {
  return RETRYABLE_CODES.has(error && error.code);
}

// The longest pause the client picks by itself (a server's hint may ask for more).
const MAX_BACKOFF_MS = 30000;

// Exponential backoff with jitter (x0.5 .. x1.5), at most MAX_BACKOFF_MS. The
// server's retry hint (argument, or the RetryInfo in the rich status of a gRPC
// error) is a floor, and the backoff makes sure a long overload is not hammered
// at the hint's pace.
function backoffMs(baseMs, attempt, hintMs = 0, error = null) {
  const retryAfterMs = error ? richDetails(error).retryAfterMs : null;
  if (retryAfterMs !== null) hintMs = Math.max(hintMs, retryAfterMs);
  const exponent = Math.min(attempt - 1, 30);
  return Math.max(hintMs, Math.min(MAX_BACKOFF_MS, baseMs * 2 ** exponent * (0.5 + Math.random())));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

module.exports = { CHANNEL_OPTIONS, RETRYABLE_CODES, MAX_BACKOFF_MS, resendHintMs, isRetryable, backoffMs, sleep };
