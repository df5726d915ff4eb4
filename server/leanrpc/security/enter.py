"""Worker entry: the monitor process, the jail, the exec of the REPL.

Run as ``python -I -S enter.py PLAN_JSON`` by the launchers; stdlib only and no
leanrpc imports (only the siblings `seccomp.py` and `jail.py`), so it works
before anything else is importable. Owns process death, the two processes and
the exec; the mount/namespace/privilege setup is `jail.py`'s; the launchers
own the plan. May import: the standard library, the siblings seccomp and jail.

Two processes, whatever the plan:

* the **monitor** (this process; the pid the pool watches) takes the parent
  death signal at once and again after every change of credentials, checks
  its parent is still the server, becomes a child subreaper and forks the
  REPL; it forwards SIGTERM, and when the REPL exits it kills every
  descendant left (a daemon that started its own session included), then
  exits with the REPL's status (sandboxed: the one its init reports). So the pid the pool watches exits exactly
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
    namespace, a tiny init (`pid_one`): it forks the REPL as PID 2, forwards
    signals, reaps, and reports the REPL's wait status to the monitor on a
    pipe; when it dies, the kernel kills everything it started.

Every setup step fails closed: exit status 126 and a line on stderr.
"""

import json
import os
import resource
import select
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's folder out

import seccomp  # noqa: E402  (stdlib-only sibling)
from jail import (  # noqa: E402,F401  (stdlib-only sibling; re-exported for tests and callers)
    CLONE_NEWNS,
    MS_BIND,
    PR_CAPBSET_DROP,
    SandboxSetupError,
    _check,
    _write,
    build_root,
    drop_privileges,
    enter_namespaces,
    remount_all_readonly,
)
from seccomp import (  # noqa: E402,F401  (re-exported for tests and callers)
    PR_SET_NO_NEW_PRIVS,
    SPAWN_SYSCALLS,
    SeccompError,
    _libc,
    install_spawn_filter,
    spawn_filter,
)

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SETUP_FAILED = 126


# -- parent death ---------------------------------------------------------------


def die_with_parent(
    expected_parent: int | None = None, alive_fd: int | None = None, signum: int = signal.SIGKILL
) -> None:
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


# -- the two processes ------------------------------------------------------------


def repl_side(plan: dict, alive_fd: int, report_fd: int) -> None:
    """The child: jail (or guard), then exec the REPL. Never returns.

    Sandboxed, it forks once more inside the jail: this process stays PID 1 of
    the namespace (`pid_one`) and the REPL runs as PID 2, so signals the REPL
    sends itself (Lean's abort(), a kill) act as anywhere else.
    """
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
        repl = os.fork()  # before the spawn filter: this process stays PID 1, the init
        if repl != 0:
            pid_one(repl, report_fd, machine if plan.get("block_spawn", True) else None)
        if plan.get("block_spawn", True):
            install_spawn_filter(machine)
        os.execvpe(argv[0], argv, env)
    except PermissionError as exc:
        raise SandboxSetupError(
            f"{exc}; the worker runs as uid {uid}: the REPL, its toolchain and project must be "
            "readable by other users (0755 directories, 0644/0755 files), or set sandbox.user"
        ) from exc


def pid_one(repl: int, report_fd: int, machine: str | None) -> None:
    """The sandbox's init (PID 1): forwards signals to the REPL, reaps, reports.

    Linux drops a signal sent to a namespace's PID 1 by its own namespace (itself
    included) unless it has a handler, so the REPL must not be PID 1: its own
    abort() or kill would read as another death. This init never touches the
    REPL's stdin and stdout (it holds /dev/null there). SIGTERM, SIGINT and
    SIGHUP are forwarded; SIGKILL cannot be, and needs not: when the monitor
    kills this process the kernel kills the whole namespace with it.

    When the REPL is gone it writes the REPL's raw wait status, in decimal, on
    `report_fd` (a pipe only the monitor reads) and exits; the monitor mirrors
    that status. An exit status alone could not say it: this process cannot
    die by a default-action signal it sends itself, and 128+N is also a real
    exit. Without a report (this init was killed) the monitor mirrors this
    process's own end. `machine` set: the spawn filter goes on this process
    too, after its one fork. Never returns.
    """
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    # Stays dumpable: the pool's warm-up audit reads every descendant's /proc
    # entries and fails closed where it cannot (an unprivileged server). The
    # REPL may then reach this process as its own uid, but the spawn filter
    # below holds for what it could make it do; a forged report can only name
    # a wrong cause for a death.

    def forward(signum, _frame):
        try:
            os.kill(repl, signum)
        except OSError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    if machine is not None:
        install_spawn_filter(machine)
    status = None
    while status is None:
        try:
            pid, got = os.waitpid(-1, 0)  # orphans in the namespace come here too
        except ChildProcessError:
            break
        if pid == repl:
            status = got
    if status is None:
        os._exit(SETUP_FAILED)
    try:
        os.write(report_fd, b"%d\n" % status)
    except OSError:
        pass
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    os._exit(code)


def read_report(report_fd: int) -> int | None:
    """The REPL's wait status as `pid_one` wrote it, or None (no report)."""
    os.set_blocking(report_fd, False)
    try:
        data = os.read(report_fd, 64)
    except OSError:
        return None
    if not data.endswith(b"\n") or not data[:-1].isdigit() or len(data) > 8:
        return None
    status = int(data[:-1])
    return status if status <= 0xFFFF else None


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
    report_r, report_w = os.pipe()  # the sandbox's init -> here: the REPL's wait status
    child = os.fork()
    if child == 0:
        os.close(alive_w)
        os.close(report_r)
        try:
            repl_side(plan, alive_r, report_w)
        except (SandboxSetupError, SeccompError, OSError, ValueError, KeyError, IndexError) as exc:
            sys.stderr.write(f"leanrpc sandbox: setup failed: {exc}\n")
            sys.stderr.flush()
        os._exit(SETUP_FAILED)
    os.close(alive_r)
    os.close(report_w)
    # The REPL's pipes are the REPL's: EOF must come when it and its tree are gone.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    # Sandboxed, the child is the namespace's init: end it with SIGKILL, and its
    # whole namespace goes too. Unsandboxed, the REPL gets the SIGTERM itself.
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
    if sandboxed:
        reported = read_report(report_r)  # the REPL's own end, not its init's
        if reported is not None:
            status = reported
    _kill_descendants()
    if plan.get("cgroup"):
        remove_cgroup(plan["cgroup"])
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # mirror the signal, not a core file
        if signum not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
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
