"""Helpers for tests/security: servers on loopback, raw stubs, worker facts."""

from __future__ import annotations

import contextlib
import os

import grpc

import testkit
from leanrpc.config import Config
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc
from testkit import loopback_config

HEADER = "import Mathlib\n\n"


def make_config(**overrides) -> Config:
    """Overrides are `section__key=value`; one worker, port 0, sandbox off unless set."""
    overrides.setdefault("sandbox__mode", "off")
    return loopback_config(1, **overrides)


@contextlib.asynccontextmanager
async def running_server(config: Config):
    """testkit's shared server (which also checks no worker outlived it)."""
    async with testkit.running_server(config) as app:
        yield app


def stub(channel: grpc.aio.Channel) -> pb_grpc.VerifierStub:
    return pb_grpc.VerifierStub(channel)


def one_snippet(code: str, snippet_id: str = "s") -> pb.VerifyRequest:
    return pb.VerifyRequest(snippets=[pb.Snippet(id=snippet_id, code=code)])


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def repl_pid(worker) -> int:
    """The REPL's pid (host view): the one child of the worker's monitor (enter.py),
    or, sandboxed, the one child of that child, the namespace's init (PID 1 there)."""
    import psutil

    (child,) = psutil.Process(worker.pid).children()
    if proc_status(child.pid)["NSpid"].split()[-1] == "1":
        (child,) = psutil.Process(child.pid).children()
    return child.pid


def proc_status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def proc_environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        items = [i.decode(errors="replace") for i in f.read().split(b"\0") if i]
    return dict(i.split("=", 1) for i in items if "=" in i)


def proc_limits(pid: int) -> dict[str, str]:
    """Soft limits by name ("Max processes" -> "1"), as /proc/<pid>/limits shows them."""
    limits = {}
    with open(f"/proc/{pid}/limits") as f:
        next(f)
        for line in f:
            name, soft = line[:26].strip(), line[26:].split()[0]
            limits[name] = soft
    return limits


def mount_flags(pid: int) -> dict[str, str]:
    """Mountpoint -> per-mount options (rw/ro first) as that process sees them."""
    flags = {}
    with open(f"/proc/{pid}/mountinfo") as f:
        for line in f:
            fields = line.split()
            flags[fields[4]] = fields[5]
    return flags


def root_is_writable_here() -> bool:
    return not os.statvfs("/").f_flag & os.ST_RDONLY


_AS_USER = r"""
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
"""


def unprivileged_argv(command: list[str], uid: int) -> list[str]:
    """`command` as `uid` (no groups, no capabilities), run from root.

    When this machine's interpreter sits under /root (mode 0700), the command
    gets a private mount namespace where /root is an empty 0755 tmpfs holding
    only that toolchain folder; nothing else changes.
    """
    import sys

    real = os.path.realpath(sys.base_prefix)
    drop = [
        "setpriv",
        "--reuid",
        str(uid),
        "--regid",
        str(uid),
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]
    if not real.startswith("/root/"):
        return drop + command
    toolchain = "/root/" + real.split("/")[2]
    return [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        _AS_USER,
        "sh",
        toolchain,
        str(uid),
        *command,
    ]
