"""Sandbox entry: runs as root, builds the worker's jail, drops to a uid, execs.

Run as ``python -I -S enter.py PLAN_JSON`` by `UnshareLauncher`; stdlib only
and no leanrpc imports, so it works before anything is importable. It execs
the REPL in the same process, so the pid the pool watches is the REPL's.

Steps, in order (each one fails closed: exit status 126 and a line on stderr):
1. new mount, network, IPC and UTS namespaces (network: only a downed `lo`);
2. every exposed path hidden behind a directory other users cannot enter
   (e.g. a toolchain under /root) is re-mounted behind a 0755 tmpfs;
3. a fresh /proc that hides other users' processes (best effort);
4. every mount read-only (bind remount, per mount, in this namespace only);
5. a private tmpfs scratch directory owned by the worker's uid;
6. rlimits; empty capability bounding set; setgroups([]); setresgid;
   setresuid; no_new_privs. Root's capabilities are gone, and read-only mounts
   inherited from this namespace are locked even inside a new user namespace,
   so `mount -o remount,rw /` fails from the worker;
7. unless the plan says otherwise, a seccomp filter that makes process
   creation fail with EPERM (threads stay allowed), installed last, so the
   exec of the REPL is the last thing done with full rights.
"""

import ctypes
import ctypes.util
import errno
import json
import os
import re
import resource
import stat
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
# statvfs f_flag bits that equal MS_* bits and must survive a bind remount.
KEPT_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC | 1024 | 2048 | 4096  # noatime, nodiratime, relatime
MNT_DETACH = 2
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
CLONE_THREAD = 0x00010000
# Classic BPF opcodes: ld word abs, jeq/jge/jset imm, ret imm.
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_JSET_K = 0x45
BPF_RET_K = 0x06
# struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (little-endian).
SECCOMP_DATA_NR = 0
SECCOMP_DATA_ARCH = 4
SECCOMP_DATA_ARG0_LOW = 16
X32_SYSCALL_BIT = 0x40000000
# machine -> (AUDIT_ARCH_*, syscall numbers: clone, clone3, fork, vfork); aarch64 has no fork/vfork.
SPAWN_SYSCALLS = {
    "x86_64": (0xC000003E, {"clone": 56, "clone3": 435, "fork": 57, "vfork": 58}),
    "aarch64": (0xC00000B7, {"clone": 220, "clone3": 435}),
}

_OCTAL = re.compile(r"\\([0-7]{3})")
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class SandboxSetupError(Exception):
    def __init__(self, message: str, errno_value: int = 0) -> None:
        super().__init__(message)
        self.errno = errno_value


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise SandboxSetupError(f"{what}: {os.strerror(err)}", err)


def _mount(source, target, fstype, flags, data=None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    rc = _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    _check(rc, f"mount {target}")


def _umount(target: str) -> None:
    _check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


def _mountpoints() -> list[str]:
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            # mountinfo escapes space, tab, newline and backslash as \ooo
            points.append(_OCTAL.sub(lambda m: chr(int(m.group(1), 8)), line.split()[4]))
    return points


def _enterable_by(path: str, uid: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    return bool(st.st_mode & stat.S_IXOTH)


def _first_blocked_ancestor(path: str, uid: int) -> str | None:
    """Highest directory on `path` (itself excluded) the worker cannot enter."""
    parts = path.strip("/").split("/")
    current = ""
    for part in parts[:-1]:
        current += "/" + part
        if not _enterable_by(current, uid):
            return current
    return None


def expose(paths: list[str], uid: int, staging: str) -> None:
    """Makes each path reachable for `uid` without opening its parents.

    The blocked ancestor is covered by an empty 0755 tmpfs into which only the
    exposed paths are bind-mounted back, so e.g. the rest of /root stays out of
    sight.
    """
    groups: dict[str, list[str]] = {}
    for path in paths:
        path = os.path.realpath(path)
        if not os.path.exists(path):
            continue
        blocked = _first_blocked_ancestor(path, uid)
        if blocked is not None:
            groups.setdefault(blocked, []).append(path)
    for n, (blocked, inner) in enumerate(sorted(groups.items())):
        # Inner paths that lie inside another exposed path come along with it.
        inner = sorted(set(inner))
        inner = [p for p in inner if not any(p != q and p.startswith(q + "/") for q in inner)]
        held = []
        for k, path in enumerate(inner):
            hold = os.path.join(staging, f"{n}-{k}")
            if os.path.isdir(path):
                os.mkdir(hold)
            else:
                open(hold, "w").close()
            _mount(path, hold, None, MS_BIND | MS_REC)
            held.append((path, hold))
        _mount("leanrpc-expose", blocked, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        for path, hold in held:
            parent = os.path.dirname(path)
            os.makedirs(parent, mode=0o755, exist_ok=True)
            if os.path.isdir(hold):
                os.makedirs(path, mode=0o755, exist_ok=True)
            else:
                open(path, "w").close()
            _mount(hold, path, None, MS_MOVE)


def _writable_mounts(skip: set[str]):
    """(mountpoint, statvfs flags) of each reachable writable mount not in `skip`."""
    for point in _mountpoints():
        if point in skip:
            continue
        try:
            flags = os.statvfs(point).f_flag
        except OSError:
            continue  # covered by a later mount or gone: unreachable anyway
        if not flags & MS_RDONLY:
            yield point, flags


def remount_all_readonly(skip: set[str]) -> None:
    for point, flags in _writable_mounts(skip):
        try:
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | (flags & KEPT_FLAGS))
        except SandboxSetupError as exc:
            # EINVAL: not a mountpoint any more (a mount hidden under the new
            # /proc, say); whatever the path now shows is checked below.
            if exc.errno != errno.EINVAL:
                raise
    # Belt and braces: nothing reachable may still be writable.
    for point, _flags in _writable_mounts(skip):
        raise SandboxSetupError(f"{point} is still writable")


def drop_privileges(uid: int, gid: int) -> None:
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last_cap = int(f.read())
    for cap in range(last_cap + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    # Leaving uid 0 for a non-zero uid clears the permitted, effective and
    # ambient capability sets.
    os.setresuid(uid, uid, uid)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if os.getuid() == 0 or os.geteuid() == 0:
        raise SandboxSetupError("still root after setresuid")


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def spawn_filter(machine: str) -> list[tuple[int, int, int, int]]:
    """BPF program: fork, vfork and clone without CLONE_THREAD fail with EPERM;
    clone3 fails with ENOSYS (its flags sit behind a pointer the filter cannot
    read), so libc falls back to clone, which is checked. Syscalls of another
    ABI (i386, x32) fail with EPERM, so they cannot go round the filter."""
    if machine not in SPAWN_SYSCALLS:
        raise SandboxSetupError(f"no seccomp spawn filter for {machine}; set sandbox.block_spawn = \"off\"")
    arch, numbers = SPAWN_SYSCALLS[machine]
    allow, deny = SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | errno.EPERM
    denied = [numbers[name] for name in ("fork", "vfork") if name in numbers]
    # (code, jump-if-true, jump-if-false, k); jumps count instructions skipped.
    prog = [
        (BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARCH),
        (BPF_JEQ_K, 1, 0, arch),
        (BPF_RET_K, 0, 0, deny),
        (BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_NR),
        (BPF_JGE_K, 0, 1, X32_SYSCALL_BIT),  # x32 ABI on x86_64
        (BPF_RET_K, 0, 0, deny),
        (BPF_JEQ_K, 0, 1, numbers["clone3"]),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),
    ]
    tail = [
        (BPF_JEQ_K, 0, 3, numbers["clone"]),  # not clone -> ret allow
        (BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARG0_LOW),
        (BPF_JSET_K, 1, 0, CLONE_THREAD),  # a thread -> ret allow
        (BPF_RET_K, 0, 0, deny),
        (BPF_RET_K, 0, 0, allow),
    ]
    for n, number in enumerate(denied):
        # Skip the remaining denied checks and the clone check, to the `ret deny`.
        prog.append((BPF_JEQ_K, (len(denied) - n - 1) + 3, 0, number))
    return prog + tail


def install_spawn_filter(machine: str) -> None:
    """Needs no_new_privs (or CAP_SYS_ADMIN); in force across exec and inherited."""
    prog = spawn_filter(machine)
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    rc = _libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.c_void_p(ctypes.addressof(fprog)), 0, 0)
    _check(rc, "seccomp spawn filter")


def main(plan: dict) -> None:
    uid, gid = plan["uid"], plan["gid"]
    scratch = plan["scratch"]
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    # Nothing mounted here may propagate back to the host.
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("leanrpc-stage", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=1m")
    expose(plan["expose"], uid, scratch)
    _umount(scratch)
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")
    except SandboxSetupError:
        pass  # older kernels: host /proc stays, read-only; ptrace needs the same uid anyway
    remount_all_readonly(skip=set())
    size = plan.get("scratch_mb", 512)
    _mount("leanrpc-scratch", scratch, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,uid={uid},gid={gid},size={size}m")
    for which, value in plan["rlimits"]:
        resource.setrlimit(which, (value, value))
    drop_privileges(uid, gid)
    # chdir after the drop, so an unreadable project fails here, clearly.
    argv = plan["argv"]
    try:
        os.chdir(plan.get("cwd") or scratch)
        if plan.get("block_spawn", True):
            install_spawn_filter(os.uname().machine)
        os.execvpe(argv[0], argv, plan["env"])
    except PermissionError as exc:
        raise SandboxSetupError(
            f"{exc}; the worker runs as uid {uid}: the REPL, its toolchain and project must be "
            "readable by other users (0755 directories, 0644/0755 files), or set sandbox.user"
        ) from exc


if __name__ == "__main__":
    try:
        main(json.loads(sys.argv[1]))
    except (SandboxSetupError, OSError, ValueError, KeyError, IndexError) as exc:
        sys.stderr.write(f"leanrpc sandbox: setup failed: {exc}\n")
        sys.stderr.flush()
        os._exit(126)
