"""The jail the sandboxed REPL side builds for itself: namespaces, the root, privileges.

Owns: the mount and namespace constants, `enter_namespaces` (user, PID,
net, IPC, UTS), `build_root` (a tmpfs root holding only the exposed paths,
read-only binds, a few /dev nodes, its own /proc, the private scratch),
`remount_all_readonly`, `drop_privileges`, and `SandboxSetupError` (every
step fails closed). Run inside the worker entry (enter.py), so: stdlib only
and no leanrpc imports; loaded as a sibling of enter.py the way seccomp.py is.
May import: the standard library and the sibling seccomp.py.
"""

import ctypes
import errno
import os
import re
import sys

from seccomp import PR_SET_NO_NEW_PRIVS, _libc

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
# statvfs f_flag bits that equal MS_* bits and must survive a bind remount.
KEPT_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC | 1024 | 2048 | 4096  # noatime, nodiratime, relatime
MNT_DETACH = 2
PR_CAPBSET_DROP = 24
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
# What every REPL needs from the host besides its exposed paths.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/ssl/certs",
)
DEVICES = ("null", "zero", "full", "random", "urandom")
OLD_ROOT = "/.leanrpc-oldroot"

_OCTAL = re.compile(r"\\([0-7]{3})")


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


def _mountpoints() -> list[str]:
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            # mountinfo escapes space, tab, newline and backslash as \ooo
            points.append(_OCTAL.sub(lambda m: chr(int(m.group(1), 8)), line.split()[4]))
    return points


# -- the jail -------------------------------------------------------------------


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter_namespaces(userns: bool, uid: int, gid: int) -> None:
    """New user namespace (identity-mapped; unless root), then PID, net, IPC, UTS."""
    if userns:
        _check(
            _libc.unshare(CLONE_NEWUSER),
            "unshare user namespace (unprivileged user namespaces refused?)",
        )
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    _check(_libc.unshare(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")


def _bind(source: str, target: str) -> None:
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        if not os.path.exists(target):
            open(target, "w").close()
    _mount(source, target, None, MS_BIND | MS_REC)


def _outermost(paths: list[str]) -> list[str]:
    """Real paths that exist, without those inside another one."""
    real = sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)})
    return [p for p in real if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in real)]


def _links_on(path: str) -> list[tuple[str, str]]:
    """(link, target) for each symlink met while resolving `path` on the host."""
    links, current = [], "/"
    for part in path.strip("/").split("/"):
        step = os.path.join(current, part)
        for _ in range(40):  # a link to a link
            if not os.path.islink(step):
                break
            target = os.readlink(step)
            links.append((step, target))
            step = os.path.normpath(os.path.join(os.path.dirname(step), target))
        current = step
    return links


def build_root(plan: dict) -> None:
    """A tmpfs root with only what the REPL needs; the host's root detached."""
    os.umask(0o022)
    # Resolved while the host's root is still the root.
    wanted = _outermost(list(SYSTEM_FILES) + list(plan["expose"]))
    # Exposed paths reached through symlinks (/work/x -> /data/x) keep working by their name.
    links = [link for path in plan["expose"] if path for link in _links_on(path)]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing propagates back to the host
    # Any existing directory will do as the base: it is covered only here.
    base = "/tmp"
    _mount("leanrpc-root", base, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m")
    os.mkdir(base + OLD_ROOT, 0o700)
    machine = os.uname().machine
    if machine not in PIVOT_ROOT:
        raise SandboxSetupError(f"no pivot_root for {machine}")
    os.chdir(base)
    _check(
        _libc.syscall(ctypes.c_long(PIVOT_ROOT[machine]), b".", ("." + OLD_ROOT).encode()),
        "pivot_root",
    )
    os.chdir("/")
    old = OLD_ROOT
    for path in SYSTEM_PATHS:
        host = old + path
        if os.path.islink(host):
            os.symlink(os.readlink(host), path)
        elif os.path.isdir(host):
            _bind(host, path)
    for path in wanted:
        if not os.path.exists(path):  # else inside /usr already
            _bind(old + path, path)
    for link, target in links:
        if not os.path.lexists(link):
            os.makedirs(os.path.dirname(link), mode=0o755, exist_ok=True)
            os.symlink(target, link)
    os.makedirs("/dev", mode=0o755, exist_ok=True)
    for name in DEVICES:
        _bind(f"{old}/dev/{name}", f"/dev/{name}")
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"/dev/{name}")
    os.makedirs("/proc", mode=0o555, exist_ok=True)
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except SandboxSetupError as exc:
        # A container runtime that masks parts of /proc refuses a new one; the
        # worker then runs without /proc (nothing of the host shows through).
        sys.stderr.write(f"leanrpc sandbox: no /proc in the sandbox ({exc})\n")
    scratch = plan["scratch"]
    # The scratch mountpoint must be made in the new root, never in a bound host folder.
    existing = scratch
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if os.stat(existing).st_dev != os.stat("/").st_dev:
        raise SandboxSetupError(
            f"the scratch {scratch} lies inside an exposed path ({existing}); "
            "set sandbox.scratch_root outside every exposed path"
        )
    os.makedirs(scratch, mode=0o755, exist_ok=True)
    _check(_libc.umount2(old.encode(), MNT_DETACH), "detach the host root")
    os.rmdir(old)
    remount_all_readonly(skip=set())
    uid, gid = plan["uid"], plan["gid"]
    size = plan.get("scratch_mb", 512)
    _mount(
        "leanrpc-scratch",
        scratch,
        "tmpfs",
        MS_NOSUID | MS_NODEV,
        f"mode=0700,uid={uid},gid={gid},size={size}m",
    )


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
            # EINVAL: not a mountpoint any more (covered by a later mount);
            # whatever the path now shows is checked below.
            if exc.errno != errno.EINVAL:
                raise
    # Belt and braces: nothing reachable may still be writable.
    for point, _flags in _writable_mounts(skip):
        raise SandboxSetupError(f"{point} is still writable")


def drop_privileges(uid: int, gid: int, userns: bool) -> None:
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last_cap = int(f.read())
    for cap in range(last_cap + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    if not userns:  # setgroups is denied in the user namespace (and empty there)
        os.setgroups([])
    os.setresgid(gid, gid, gid)
    # Leaving uid 0 for a non-zero uid clears the permitted, effective and
    # ambient capability sets; in a user namespace the exec of a non-root uid
    # does (and the bounding set is empty anyway).
    os.setresuid(uid, uid, uid)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if os.getuid() == 0 or os.geteuid() == 0:
        raise SandboxSetupError("still root after setresuid")
