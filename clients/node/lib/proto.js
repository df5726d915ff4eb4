'use strict';
// The gRPC contract, loaded at run time from the copy inside this package
// (proto/, put there by scripts/copy-proto.js at `npm ci`/`npm pack` time).
// Owns: where the .proto files are and how they are loaded, and decoding the
// rich error status (google.rpc.Status in the `grpc-status-details-bin`
// trailer). May import: @grpc/grpc-js, @grpc/proto-loader, protobufjs.

const fs = require('node:fs');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

const VERIFIER_PROTO = path.join('leanrpc', 'v1', 'verifier.proto');

function protoRoot() {
  const root = process.env.LEANRPC_PROTO_ROOT || path.resolve(__dirname, '..', 'proto');
  if (!fs.existsSync(path.join(root, VERIFIER_PROTO))) {
    throw new Error(
      `leanrpc: ${path.join(root, VERIFIER_PROTO)} is missing; inside the repository run ` +
        '`npm ci` (or `npm run prepare`) in clients/node to copy the contract',
    );
  }
  return root;
}

// Returns the `leanrpc.v1` namespace (service constructors: Verifier, ...).
function loadVerifier() {
  const definition = protoLoader.loadSync([VERIFIER_PROTO], {
    includeDirs: [protoRoot()],
    keepCase: true,
    longs: Number,
    enums: String, // statuses arrive as names: 'STATUS_VALID', ... (lib/convert.js shortens them)
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(definition).leanrpc.v1;
}

let richTypes = null;

// google.rpc.Status and the detail types leanrpc sends, loaded once.
function richStatusTypes() {
  if (richTypes) return richTypes;
  const root = new protobuf.Root();
  const base = protoRoot();
  // google/protobuf/*.proto are protobufjs' bundled copies; the rest is ours.
  root.resolvePath = (origin, target) => (target.startsWith('google/protobuf/') ? target : path.join(base, target));
  root.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto'], { keepCase: true });
  richTypes = {
    Status: root.lookupType('google.rpc.Status'),
    byUrl: new Map(
      ['RetryInfo', 'ErrorInfo', 'BadRequest'].map((name) => [`type.googleapis.com/google.rpc.${name}`, root.lookupType(`google.rpc.${name}`)]),
    ),
  };
  return richTypes;
}

// The rich status of a failed call as {retryAfterMs, reason, fieldViolations}
// (each null/empty when the server sent no such detail).
function richDetails(error) {
  const out = { retryAfterMs: null, reason: '', fieldViolations: [] };
  const raw = error && error.metadata ? error.metadata.get('grpc-status-details-bin') : [];
  if (!raw.length) return out;
  const { Status, byUrl } = richStatusTypes();
  const status = Status.decode(raw[0]);
  for (const detail of status.details) {
    const type = byUrl.get(detail.type_url);
    if (!type) continue;
    const value = type.toObject(type.decode(detail.value), { longs: Number, defaults: true });
    if (detail.type_url.endsWith('.RetryInfo')) {
      const delay = value.retry_delay || { seconds: 0, nanos: 0 };
      out.retryAfterMs = delay.seconds * 1000 + delay.nanos / 1e6;
    } else if (detail.type_url.endsWith('.ErrorInfo')) {
      out.reason = value.reason;
    } else {
      out.fieldViolations = value.field_violations.map((v) => ({ field: v.field, description: v.description }));
    }
  }
  return out;
}

module.exports = { loadVerifier, protoRoot, richDetails };
