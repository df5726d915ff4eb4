'use strict';
// The gRPC contract, loaded at run time from the copy inside this package
// (proto/, put there by scripts/copy-proto.js at `npm ci`/`npm pack` time).
// Owns: where the .proto files are and how they are loaded. May import:
// @grpc/grpc-js, @grpc/proto-loader.

const fs = require('node:fs');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

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
    enums: String, // statuses arrive as names: 'VALID', 'SORRY', ...
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(definition).leanrpc.v1;
}

module.exports = { loadVerifier, protoRoot };
