"""Seccomp-BPF filters the worker launch installs: no new processes, no signals upward.

Stdlib only and no leanrpc imports: `enter.py` loads it before anything else
is importable. Owns the BPF programs and their installation; may import only
the standard library.

* `spawn_filter`: fork, vfork and clone without CLONE_THREAD fail with EPERM,
  clone3 with ENOSYS (its flags sit behind a pointer the filter cannot read,
  so libc falls back to clone, which is checked). Threads keep working.
* `signal_guard_filter`: the worker may not signal, ptrace or pidfd-open the
  server (its pid, its process group, or everyone with kill(-1)); tkill,
  ptrace and process_vm_writev fail outright. Used when the worker shares
  the server's uid (sandbox off, or a user namespace without a PID namespace).

Syscalls of another ABI (i386, x32) fail with EPERM in both, so they cannot go
round the filter.
"""

import ctypes
import ctypes.util
import errno

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
# Syscalls the signal guard checks, per machine.
SIGNAL_SYSCALLS = {
    "x86_64": {
        "kill": 62,
        "rt_sigqueueinfo": 129,
        "tgkill": 234,
        "rt_tgsigqueueinfo": 297,
        "pidfd_open": 434,
        "tkill": 200,
        "ptrace": 101,
        "process_vm_writev": 311,
    },
    "aarch64": {
        "kill": 129,
        "rt_sigqueueinfo": 138,
        "tgkill": 131,
        "rt_tgsigqueueinfo": 240,
        "pidfd_open": 434,
        "tkill": 130,
        "ptrace": 117,
        "process_vm_writev": 271,
    },
}

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class SeccompError(Exception):
    def __init__(self, message: str, errno_value: int = 0) -> None:
        super().__init__(message)
        self.errno = errno_value


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _deny(err: int = errno.EPERM) -> int:
    return SECCOMP_RET_ERRNO | err


def _abi_prologue(arch: int) -> list[tuple[int, int, int, int]]:
    """Other ABIs are denied; leaves the syscall number loaded."""
    return [
        (BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARCH),
        (BPF_JEQ_K, 1, 0, arch),
        (BPF_RET_K, 0, 0, _deny()),
        (BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_NR),
        (BPF_JGE_K, 0, 1, X32_SYSCALL_BIT),  # x32 ABI on x86_64
        (BPF_RET_K, 0, 0, _deny()),
    ]


def spawn_filter(machine: str) -> list[tuple[int, int, int, int]]:
    """BPF program (code, jump-if-true, jump-if-false, k) against process creation."""
    if machine not in SPAWN_SYSCALLS:
        raise SeccompError(
            f'no seccomp spawn filter for {machine}; set sandbox.block_spawn = "off"'
        )
    arch, numbers = SPAWN_SYSCALLS[machine]
    denied = [numbers[name] for name in ("fork", "vfork") if name in numbers]
    prog = _abi_prologue(arch) + [
        (BPF_JEQ_K, 0, 1, numbers["clone3"]),
        (BPF_RET_K, 0, 0, _deny(errno.ENOSYS)),
    ]
    tail = [
        (BPF_JEQ_K, 0, 3, numbers["clone"]),  # not clone -> ret allow
        (BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARG0_LOW),
        (BPF_JSET_K, 1, 0, CLONE_THREAD),  # a thread -> ret allow
        (BPF_RET_K, 0, 0, _deny()),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    for n, number in enumerate(denied):
        # Skip the remaining denied checks and the clone check, to the `ret deny`.
        prog.append((BPF_JEQ_K, (len(denied) - n - 1) + 3, 0, number))
    return prog + tail


def _assemble(items: list) -> list[tuple[int, int, int, int]]:
    """Resolves ("label", name) markers and string jump targets into offsets."""
    labels, position = {}, 0
    for item in items:
        if item[0] == "label":
            labels[item[1]] = position
        else:
            position += 1
    prog = []
    for item in items:
        if item[0] == "label":
            continue
        code, jt, jf, k = item
        here = len(prog) + 1
        jt = labels[jt] - here if isinstance(jt, str) else jt
        jf = labels[jf] - here if isinstance(jf, str) else jf
        prog.append((code, jt, jf, k))
    return prog


def signal_guard_filter(
    machine: str, server_pid: int, server_pgid: int
) -> list[tuple[int, int, int, int]]:
    """BPF program: no signal, pidfd or ptrace can reach the server."""
    if machine not in SIGNAL_SYSCALLS:
        raise SeccompError(f"no seccomp signal guard for {machine}")
    arch = SPAWN_SYSCALLS[machine][0]
    nr = SIGNAL_SYSCALLS[machine]
    mask = 0xFFFFFFFF
    # kill(pid) and rt_sigqueueinfo(pid): the server, its group, everyone (-1).
    targets = sorted({server_pid, -server_pid & mask, -server_pgid & mask, mask})
    items: list = _abi_prologue(arch)
    for name in ("tkill", "ptrace", "process_vm_writev"):
        items.append((BPF_JEQ_K, "deny", 0, nr[name]))
    for name in ("kill", "rt_sigqueueinfo"):
        items.append((BPF_JEQ_K, "by_pid", 0, nr[name]))
    for name in ("tgkill", "rt_tgsigqueueinfo", "pidfd_open"):
        items.append((BPF_JEQ_K, "by_tgid", 0, nr[name]))
    items.append((BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    items.append(("label", "by_pid"))
    items.append((BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARG0_LOW))
    for value in targets:
        items.append((BPF_JEQ_K, "deny", 0, value))
    items.append((BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    items.append(("label", "by_tgid"))
    items.append((BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARG0_LOW))
    items.append((BPF_JEQ_K, "deny", 0, server_pid))
    items.append((BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    items.append(("label", "deny"))
    items.append((BPF_RET_K, 0, 0, _deny()))
    return _assemble(items)


def install(prog: list[tuple[int, int, int, int]], what: str) -> None:
    """Needs no_new_privs (or CAP_SYS_ADMIN); in force across exec and inherited."""
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    rc = _libc.prctl(
        PR_SET_SECCOMP,
        ctypes.c_ulong(SECCOMP_MODE_FILTER),
        ctypes.c_void_p(ctypes.addressof(fprog)),
        0,
        0,
    )
    if rc != 0:
        err = ctypes.get_errno()
        raise SeccompError(f"{what}: {errno.errorcode.get(err, err)}", err)


def install_spawn_filter(machine: str) -> None:
    install(spawn_filter(machine), "seccomp spawn filter")


def install_signal_guard(machine: str, server_pid: int, server_pgid: int) -> None:
    install(signal_guard_filter(machine, server_pid, server_pgid), "seccomp signal guard")
