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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
UID = 1234567

_AS_USER = r'''
set -e
stage=$(mktemp -d)
toolchain=$1; shift
mount --bind "$toolchain" "$stage"
mount -t tmpfs -o mode=0755,size=1m leanrpc-test /root
mkdir -p "$toolchain"
mount --move "$stage" "$toolchain"
rmdir "$stage"
uid=$1; shift
exec setpriv --reuid "$uid" --regid "$uid" --clear-groups --inh-caps=-all --bounding-set=-all -- "$@"
'''


def _toolchain() -> str:
    """The folder under /root that holds the interpreter (e.g. /root/.pyenv), or ''."""
    real = os.path.realpath(sys.base_prefix)
    if not real.startswith("/root/"):
        return ""
    return "/root/" + real.split("/")[2]


@pytest.mark.skipif(os.geteuid() != 0, reason="already unprivileged: the suite runs as is")
def test_attack_suite_passes_as_an_unprivileged_user():
    assert shutil.which("setpriv") and shutil.which("unshare"), "util-linux setpriv/unshare are needed"
    home = tempfile.mkdtemp(prefix="leanrpc-unpriv-", dir="/tmp")
    os.chmod(home, 0o1777)
    try:
        toolchain = _toolchain() or "/nonexistent"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   os.path.join(HERE, "test_attacks.py"), os.path.join(HERE, "test_sandbox.py")]
        if toolchain == "/nonexistent":
            argv = ["setpriv", "--reuid", str(UID), "--regid", str(UID), "--clear-groups",
                    "--inh-caps=-all", "--bounding-set=-all", "--", *command]
        else:
            argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", _AS_USER, "sh",
                    toolchain, str(UID), *command]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "TMPDIR": home,
               "USER": "leanrpc-test", "LANG": "C.UTF-8"}
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        tail = done.stdout[-4000:] + done.stderr[-2000:]
        assert done.returncode == 0, tail
        assert " passed" in done.stdout and " failed" not in done.stdout, tail
    finally:
        shutil.rmtree(home, ignore_errors=True)
