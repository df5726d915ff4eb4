#!/usr/bin/env bash
# Creates benchmarks/.peers-venv with the two peers the side-by-side benchmark runs:
#   kimina-ast-server (PyPI; the Kimina Lean Server v2 as published by Project Numina)
#   lean-interact     (PyPI; LeanInteract)
# They get their own virtualenv so their dependencies (FastAPI, pydantic, prisma, gitpython...)
# never touch leanrpc's. kimina-ast-server needs Python >= 3.12: its client models use
# typing.TypedDict, which pydantic rejects on 3.11. Override with PEERS_PYTHON=/path/to/python3.12.
# No Lean is installed: both peers are pointed at leanrpc's REPL stand-in through the shims in
# benchmarks/peers/shim (see docs/BENCHMARKS.md).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/../.peers-venv"
python="${PEERS_PYTHON:-}"
if [ -z "$python" ]; then
  # pyenv shims exist for versions that are installed but not active, so try each one.
  for candidate in python3.12 python3.13 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
    if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      python="$candidate"
      break
    fi
  done
fi
if [ -z "$python" ]; then
  echo "setup.sh: need Python >= 3.12 (set PEERS_PYTHON)" >&2
  exit 1
fi
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check \
  "kimina-ast-server==2.1.3" "lean-interact==0.11.6" \
  "fastapi==0.128.0"  # kimina-ast-server 2.1.3 passes logger= to FastAPI(), which later releases reject
"$venv/bin/python" - <<'PY'
import importlib.metadata as md
for name in ("kimina-ast-server", "kimina-ast-client", "lean-interact"):
    print(f"{name} {md.version(name)}")
PY
