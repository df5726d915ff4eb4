"""The Python client as its own distribution: built alone, it works without the server package."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from cli_support import BAD, GOOD, Served

ROOT = Path(__file__).resolve().parents[2]


def test_client_wheel_verifies_without_the_leanrpc_package(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            str(ROOT / "clients" / "python"),
        ],
        check=True,
        timeout=300,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("leanrpc_client-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "leanrpc_client/_v1/verifier_pb2_grpc.py" in names and "leanrpc_client/sync.py" in names
    assert not any(n.startswith("leanrpc/") for n in names)
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    served = Served()
    try:
        code = (
            "import sys; sys.modules['leanrpc'] = None  # the server package is not there\n"
            f"sys.path.insert(0, {str(tmp_path / 'site')!r})\n"
            "from leanrpc_client import Client\n"
            f"with Client({served.address!r}) as c:\n"
            f"    print([r.status for r in c.verify([{GOOD!r}, {BAD!r}])])\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
    finally:
        served.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['VALID', 'INVALID']"
