'use strict';
// Copies the contract (proto/leanrpc/**/*.proto from the repository root) into
// this package's proto/ folder, so the package carries it and never reads
// ../../proto at run time. Runs as the `prepare` script: on `npm ci`/`npm install`
// inside the repository and before `npm pack`/`npm publish`.

const fs = require('node:fs');
const path = require('node:path');

const source = path.resolve(__dirname, '..', '..', '..', 'proto', 'leanrpc');
const target = path.resolve(__dirname, '..', 'proto', 'leanrpc');

if (!fs.existsSync(source)) {
  // Outside the repository (e.g. an unpacked tarball) the copy is already there.
  if (fs.existsSync(path.join(target, 'v1', 'verifier.proto'))) process.exit(0);
  console.error(`copy-proto: ${source} not found and the package has no proto/ copy`);
  process.exit(1);
}
fs.rmSync(target, { recursive: true, force: true });
fs.cpSync(source, target, {
  recursive: true,
  filter: (file) => fs.statSync(file).isDirectory() || file.endsWith('.proto'),
});
