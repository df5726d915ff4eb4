"""Worker entry: the monitor process, the jail, the exec of the REPL.

Run as ``python -I -S enter.py PLAN_JSON`` by the launchers; stdlib only and no
leanrpc imports (only the sibling `seccomp.py`), so it works before anything
else is importable. Owns process death and the mount/namespace setup; the
launchers own the plan.

Two processes, whatever the plan:

* the **monitor** (this process; the pid the pool watches) takes the parent
  death signal at once and again after every change of credentials, checks
  its parent is still the server, becomes a child subreaper and forks the
  REPL; it forwards SIGTERM, and when the REPL exits it kills every
  descendant left (a daemon that started its own session included), then
  exits with the REPL's status. So the pid the pool watches exits exactly
  when the REPL does, and nothing outlives it or the server.
* the **REPL side** (the child) takes the parent-death signal too (checked
  against a pipe, as its parent may sit outside its PID namespace), and then:

  - plan "plain" (sandbox off): its own session (from the launcher), no_new_privs
    and a seccomp guard so it cannot signal, ptrace or pidfd-open the server;
  - plan "sandbox": new user (unless root), PID, mount, network, IPC and UTS
    namespaces; a fresh tmpfs root holding only the exposed paths (read-only
    binds), a few /dev nodes, its own /proc and a private tmpfs scratch, the
    only writable place; rlimits; no capabilities; no_new_privs; a uid of its
    own (root server) or the server's uid mapped into the user namespace;
    a seccomp spawn filter unless the plan says otherwise. It is PID 1 of its
    namespace: when it dies, the kernel kills everything it started.

Every setup step fails closed: exit status 126 and a line on stderr.
"""

import ctypes
import errno
import json
import os
import re
import resource
import select
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's folder out

import seccomp  # noqa: E402  (stdlib-only sibling)
from seccomp import (  # noqa: E402,F401  (re-exported for tests and callers)
    PR_SET_NO_NEW_PRIVS,
    SPAWN_SYSCALLS,
    SeccompError,
    _libc,
    install_spawn_filter,
    spawn_filter,
)

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
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SETUP_FAILED = 126
# What every REPL needs from the host besides its exposed paths.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
                "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/ssl/certs")
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


# -- parent death ---------------------------------------------------------------


def die_with_parent(expected_parent: int | None = None, alive_fd: int | None = None,
                    signum: int = signal.SIGKILL) -> None:
    """`signum` (SIGKILL) when the parent dies; exits now if it already has.

    Must be called again after any change of credentials (the kernel clears
    the setting then). `expected_parent` checks getppid(); `alive_fd` is the
    read end of a pipe the parent holds open (for a child in another PID
    namespace, whose getppid() is 0).
    """
    _check(_libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0), "parent-death signal")
    gone = expected_parent is not None and os.getppid() != expected_parent
    if alive_fd is not None and select.select([alive_fd], [], [], 0)[0]:
        gone = True  # readable means EOF: the writer (the parent) is gone
    if gone:
        os._exit(SETUP_FAILED)


# -- the jail -------------------------------------------------------------------


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter_namespaces(userns: bool, uid: int, gid: int) -> None:
    """New user namespace (identity-mapped; unless root), then PID, net, IPC, UTS."""
    if userns:
        _check(_libc.unshare(CLONE_NEWUSER), "unshare user namespace (unprivileged user namespaces refused?)")
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
    _check(_libc.syscall(ctypes.c_long(PIVOT_ROOT[machine]), b".", ("." + OLD_ROOT).encode()), "pivot_root")
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
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
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
        raise SandboxSetupError(f"the scratch {scratch} lies inside an exposed path ({existing}); "
                                "set sandbox.scratch_root outside every exposed path")
    os.makedirs(scratch, mode=0o755, exist_ok=True)
    _check(_libc.umount2(old.encode(), MNT_DETACH), "detach the host root")
    os.rmdir(old)
    remount_all_readonly(skip=set())
    uid, gid = plan["uid"], plan["gid"]
    size = plan.get("scratch_mb", 512)
    _mount("leanrpc-scratch", scratch, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,uid={uid},gid={gid},size={size}m")


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


# -- the two processes ------------------------------------------------------------


def repl_side(plan: dict, alive_fd: int) -> None:
    """The child: jail (or guard), then exec the REPL. Never returns."""
    die_with_parent(alive_fd=alive_fd)
    if plan.get("cgroup"):
        _write(plan["cgroup"] + "/cgroup.procs", "0")  # first: all it starts is in there too
    machine = os.uname().machine
    argv, env = plan["argv"], plan.get("env")
    if plan["kind"] == "plain":
        for which, value in plan.get("rlimits", []):
            resource.setrlimit(which, (value, value))
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        seccomp.install_signal_guard(machine, plan["server_pid"], plan["server_pgid"])
        if plan.get("cwd"):
            os.chdir(plan["cwd"])
        os.execvpe(argv[0], argv, env if env is not None else dict(os.environ))
    uid, gid, userns = plan["uid"], plan["gid"], plan["userns"]
    _check(_libc.unshare(CLONE_NEWNS), "unshare mount namespace")
    build_root(plan)
    for which, value in plan["rlimits"]:
        resource.setrlimit(which, (value, value))
    drop_privileges(uid, gid, userns)
    die_with_parent(alive_fd=alive_fd)  # the uid change cleared it
    try:
        # chdir after the drop, so an unreadable project fails here, clearly.
        os.chdir(plan.get("cwd") or plan["scratch"])
        if plan.get("block_spawn", True):
            install_spawn_filter(machine)
        os.execvpe(argv[0], argv, env)
    except PermissionError as exc:
        raise SandboxSetupError(
            f"{exc}; the worker runs as uid {uid}: the REPL, its toolchain and project must be "
            "readable by other users (0755 directories, 0644/0755 files), or set sandbox.user"
        ) from exc


def remove_cgroup(path: str) -> None:
    """Kills what is left in the worker's cgroup, then removes it (best effort).

    A kernel OOM kill under memory.max is said on stderr first, so the worker
    reads the death as out of memory, not as a crash.
    """
    try:
        with open(path + "/memory.events") as f:
            events = dict(line.split() for line in f if line.strip())
        if int(events.get("oom_kill", "0")) > 0:
            sys.stderr.write("leanrpc sandbox: out of memory: killed at the cgroup's memory.max\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
    try:
        _write(path + "/cgroup.kill", "1")
    except OSError:
        pass
    for _ in range(100):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            select.select([], [], [], 0.01)  # members still exiting


def _kill_descendants() -> None:
    """SIGKILLs every process below this one (orphans come here: subreaper)."""
    for _round in range(100):
        found = _descendants(os.getpid())
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return
        if not found:
            return


def _descendants(root: int) -> list[int]:
    """Every process below `root`: the stdlib-only twin of worker/proctree.py's
    walk (this entry runs as a script and imports nothing of leanrpc);
    tests/security/test_proctree_twin.py checks that the two agree."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    children = [int(c) for c in f.read().split()]
            except OSError:
                continue
            out += children
            todo += children
    return out


def monitor(plan: dict) -> None:
    """This process: forks the REPL side, forwards SIGTERM, reaps, mirrors its exit.

    Its own parent-death signal is SIGTERM, caught: the server is gone, so it
    kills every descendant (daemons too: they are below this subreaper) and
    the worker's cgroup before it exits. Until the handler is installed the
    default action ends it, and the REPL side dies by its own signal.
    """
    die_with_parent(expected_parent=plan["server_pid"], signum=signal.SIGTERM)
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    sandboxed = plan["kind"] == "sandbox"
    if sandboxed:
        enter_namespaces(plan["userns"], plan["uid"], plan["gid"])
    alive_r, alive_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(alive_w)
        try:
            repl_side(plan, alive_r)
        except (SandboxSetupError, SeccompError, OSError, ValueError, KeyError, IndexError) as exc:
            sys.stderr.write(f"leanrpc sandbox: setup failed: {exc}\n")
            sys.stderr.flush()
        os._exit(SETUP_FAILED)
    os.close(alive_r)
    # The REPL's pipes are the REPL's: EOF must come when it and its tree are gone.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    # PID 1 of a namespace ignores SIGTERM without a handler: end it with SIGKILL
    # (its whole namespace goes too). Unsandboxed, the REPL gets the SIGTERM itself.
    forward = signal.SIGKILL if sandboxed else signal.SIGTERM

    def on_signal(signum, _frame):
        if signum == signal.SIGTERM and os.getppid() != plan["server_pid"]:
            _kill_descendants()  # the server died: take everything along
            if plan.get("cgroup"):
                remove_cgroup(plan["cgroup"])
            os._exit(SETUP_FAILED)
        try:
            os.kill(child, forward if signum == signal.SIGTERM else signal.SIGKILL)
        except OSError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    while True:
        try:
            pid, status = os.waitpid(child, 0)
        except InterruptedError:
            continue
        if pid == child:
            break
    _kill_descendants()
    if plan.get("cgroup"):
        remove_cgroup(plan["cgroup"])
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # mirror the signal, not a core file
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)
    os._exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    try:
        monitor(json.loads(sys.argv[1]))
    except (SandboxSetupError, SeccompError, OSError, ValueError, KeyError, IndexError) as exc:
        sys.stderr.write(f"leanrpc sandbox: setup failed: {exc}\n")
        sys.stderr.flush()
        os._exit(SETUP_FAILED)
