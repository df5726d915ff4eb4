"""The attack suite again, as an unprivileged uid: the sandbox must hold without root.

Runs tests/security/test_attacks.py and test_sandbox.py in a child pytest as
uid 1234567 (no passwd entry, no capabilities, no groups). The interpreter of
this machine sits under /root (mode 0700), so the child first gets a private
mount namespace where /root is an empty 0755 tmpfs holding only the Python
toolchain; nothing else changes. The server in there uses unprivileged user
namespaces for its sandbox.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from security_support import unprivileged_argv

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
UID = 1234567


@pytest.mark.skipif(os.geteuid() != 0, reason="already unprivileged: the suite runs as is")
def test_attack_suite_passes_as_an_unprivileged_user():
    assert shutil.which("setpriv") and shutil.which("unshare"), (
        "util-linux setpriv/unshare are needed"
    )
    home = tempfile.mkdtemp(prefix="leanrpc-unpriv-", dir="/tmp")
    os.chmod(home, 0o1777)
    try:
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            os.path.join(HERE, "test_attacks.py"),
            os.path.join(HERE, "test_sandbox.py"),
        ]
        argv = unprivileged_argv(command, UID)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "TMPDIR": home,
            "USER": "leanrpc-test",
            "LANG": "C.UTF-8",
        }
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        tail = done.stdout[-4000:] + done.stderr[-2000:]
        assert done.returncode == 0, tail
        assert " passed" in done.stdout and " failed" not in done.stdout, tail
    finally:
        shutil.rmtree(home, ignore_errors=True)
