"""The reward adapters ship in the client's own wheel and work without the server
package: a trainer installs only leanrpc-client (issue 38 item 1)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATEMENT = "theorem add_comm' (a b : ℕ) : a + b = b + a := by\n"


async def test_the_client_wheel_scores_without_leanrpc(tmp_path, server):
    address = await server()
    built = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(tmp_path / "dist"), str(ROOT / "clients" / "python")],
        capture_output=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr.decode()[-2000:]
    (wheel,) = (tmp_path / "dist").glob("leanrpc_client-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("__init__", "core", "extraction", "trl", "verl", "openrlhf", "verifiers"):
        assert f"leanrpc_client/rewards/{module}.py" in names
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    site = tmp_path / "site"
    code = (
        "import sys, json, importlib.util; sys.modules['leanrpc'] = None  # no server package\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        "from leanrpc_client.rewards import LeanReward\n"
        f"r = LeanReward(server={address!r})\n"
        f"trl = r(completions=['```lean\\n  omega\\n```', 'no'], formal_statement=[{STATEMENT!r}] * 2)\n"
        # verl loads the file by path, outside any package
        f"spec = importlib.util.spec_from_file_location('custom', {str(site / 'leanrpc_client/rewards/verl.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        f"verl = m.compute_score('d', '```lean\\n  omega\\n```', {STATEMENT!r}, {{}}, server={address!r})\n"
        "print(json.dumps([trl, verl['score'], m._pkg.__name__]))\n"
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [
        [1.0, 0.0],
        1.0,
        "leanrpc_client.rewards",
    ]
