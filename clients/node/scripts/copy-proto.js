'use strict';
// Copies the contract (proto/leanrpc/**, with the header-hash test vectors, and
// proto/google/rpc/*.proto from the repository root) into
// this package's proto/ folder, so the package carries it and never reads
// ../../proto at run time. Runs as the `prepare` script: on `npm ci`/`npm install`
// inside the repository and before `npm pack`/`npm publish`.

const fs = require('node:fs');
const path = require('node:path');

const repoProto = path.resolve(__dirname, '..', '..', '..', 'proto');
const target = path.resolve(__dirname, '..', 'proto');
// The contract, and googleapis' google/rpc protos for the rich error status.
const PARTS = ['leanrpc', path.join('google', 'rpc')];

if (!fs.existsSync(path.join(repoProto, 'leanrpc'))) {
  // Outside the repository (e.g. an unpacked tarball) the copy is already there.
  if (fs.existsSync(path.join(target, 'leanrpc', 'v1', 'verifier.proto'))) process.exit(0);
  console.error(`copy-proto: ${path.join(repoProto, 'leanrpc')} not found and the package has no proto/ copy`);
  process.exit(1);
}
fs.rmSync(target, { recursive: true, force: true });
for (const part of PARTS) {
  fs.cpSync(path.join(repoProto, part), path.join(target, part), {
    recursive: true,
    filter: (file) => fs.statSync(file).isDirectory() || file.endsWith('.proto') || file.endsWith('.json'),
  });
}
