"""One REPL process, one protocol channel, one state machine.

    pool --request(payload)--> Worker --stdin JSON + blank line--> REPL
                               Worker <--frames (FrameDecoder)---- REPL stdout
                               stderr tail <----------------------- REPL stderr

A Worker lives exactly as long as its process: after a kill or a crash it is
DEAD and the pool makes a new one. Any doubt about the process (timeout,
garbage on stdout, memory over the limit, cancellation mid-request) kills it;
the REPL has no way to cancel work or resynchronise, so a doubtful worker is
never reused.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
import os
import time

import psutil

from ..config import LimitsConfig
from ..core.framing import FrameDecoder, decode_frame, encode_request
from ..core.trie import PrefixTrie
from ..errors import (
    FramingError,
    HeaderLoadError,
    InternalError,
    WorkerBootError,
    WorkerCrashed,
    WorkerError,
    WorkerOutOfMemory,
    WorkerTimeout,
)
from .launcher import LaunchSpec, Launcher, kill_process_group
from .memory import tree_memory_of

log = logging.getLogger("leanrpc.worker")

STDERR_TAIL_BYTES = 8192
_READ_CHUNK = 1 << 16

# A command that must elaborate cleanly on any env whose header loaded; the
# real REPL answers a failed import with an empty env and no error (PR #73).
HEADER_PROBE = "example : True := trivial"
IDENTITY_PROBE = "#eval Lean.versionString"
FORK_PROBE = "def leanrpcForkProbe : Nat := 0"


class WorkerState(enum.Enum):
    SPAWNING = "spawning"
    WARMING = "warming"    # loading a header or preamble
    IDLE = "idle"
    BUSY = "busy"
    STOPPING = "stopping"  # being killed or shut down; never reused
    DEAD = "dead"
    FAILED = "failed"      # could not boot


_TRANSITIONS: dict[WorkerState, frozenset[WorkerState]] = {
    WorkerState.SPAWNING: frozenset({WorkerState.IDLE, WorkerState.STOPPING, WorkerState.FAILED}),
    WorkerState.WARMING: frozenset({WorkerState.IDLE, WorkerState.BUSY, WorkerState.STOPPING}),
    WorkerState.IDLE: frozenset({WorkerState.BUSY, WorkerState.WARMING, WorkerState.STOPPING}),
    WorkerState.BUSY: frozenset({WorkerState.IDLE, WorkerState.WARMING, WorkerState.STOPPING}),
    WorkerState.STOPPING: frozenset({WorkerState.DEAD}),
    WorkerState.DEAD: frozenset(),
    WorkerState.FAILED: frozenset({WorkerState.DEAD}),
}


# What a REPL prints when an allocation fails (Lean's runtime, C++, the
# stand-in's Python) before it exits.
_OUT_OF_MEMORY_MARKERS = ("INTERNAL PANIC: out of memory", "std::bad_alloc", "MemoryError", "leanrpc sandbox: out of memory")


class ExitCause(enum.Enum):
    """Why a worker went away; counted in metrics as restarts by cause."""

    TIMEOUT = "timeout"
    CRASH = "crash"
    OUT_OF_MEMORY = "out_of_memory"
    GARBAGE = "garbage"
    CANCELLED = "cancelled"
    MAX_REQUESTS = "max_requests"
    SYSTEM_MEMORY = "system_memory"
    HEADER_SWITCH = "header_switch"
    HEADER_FAILED = "header_failed"
    STDERR = "stderr"
    BOOT_FAILURE = "boot_failure"
    SHUTDOWN = "shutdown"


class ShutdownRung(enum.Enum):
    """How far the graded shutdown had to go."""

    EXITED = "exited"      # already gone
    EOF = "eof"            # exited after stdin closed
    TERM = "term"          # needed SIGTERM
    KILL = "kill"          # needed SIGKILL


class Worker:
    """Owns one REPL process. Changes state only through `_set_state`."""

    def __init__(
        self,
        name: str,
        spec: LaunchSpec,
        launcher: Launcher,
        limits: LimitsConfig,
        *,
        history_limit: int = 64,
        on_state_change=None,
    ) -> None:
        self.name = name
        self._spec = spec
        self._launcher = launcher
        self._limits = limits
        self._on_state_change = on_state_change
        self.state = WorkerState.SPAWNING
        self.process: asyncio.subprocess.Process | None = None
        self.pid: int | None = None
        self.started_at = time.monotonic()
        self.last_used = time.monotonic()
        self.requests_served = 0
        # The import header this process loaded (one per process, for life).
        self.import_key: str | None = None
        # The header being loaded, so routing counts a warming worker as a
        # future holder of it.
        self.loading_key: str | None = None
        self.imports_env: int | None = None
        self.preamble_envs: collections.OrderedDict[str, int] = collections.OrderedDict()
        # Bodies elaborated on each base env, for prefix routing.
        self.history = PrefixTrie()
        # (history key, caller's tag) oldest first; the tag lets the pool drop
        # its own index entry when this bounded history forgets a body.
        self._history_order: collections.deque[tuple[str, object]] = collections.deque()
        self._history_limit = history_limit
        # Routing estimate: when the current request is expected to finish.
        self.busy_since = 0.0
        self.expected_busy_s = 0.0
        self.version_string = ""
        # Set when the worker must not be reused after its current request.
        self.recycle_reason: ExitCause | None = None
        self.exit_cause: ExitCause | None = None
        self.returncode: int | None = None
        self._decoder = FrameDecoder(max_frame=limits.max_frame_mb * 2**20)
        self._pending: asyncio.Future | None = None
        self._stderr_tail = bytearray()
        self.stderr_bytes = 0
        self._stderr_seen_at_request = 0
        self._reader_task: asyncio.Task | None = None
        self._stderr_task: asyncio.Task | None = None
        self._exited = asyncio.Event()
        self._psutil: psutil.Process | None = None
        self._children: list[psutil.Process] = []
        self._children_listed_at = float("-inf")

    # -- state -----------------------------------------------------------------

    def _set_state(self, new: WorkerState) -> None:
        if new is self.state:
            return
        if new not in _TRANSITIONS[self.state]:
            raise InternalError(f"worker {self.name}: illegal transition {self.state.value} -> {new.value}")
        old, self.state = self.state, new
        if self._on_state_change is not None:
            self._on_state_change(self, old, new)

    @property
    def alive(self) -> bool:
        return self.state in (WorkerState.IDLE, WorkerState.BUSY, WorkerState.WARMING, WorkerState.SPAWNING)

    @property
    def header_key(self) -> str | None:
        """The header this worker holds or is loading."""
        return self.import_key if self.import_key is not None else self.loading_key

    def mark_busy(self) -> None:
        if self.state is not WorkerState.BUSY:
            self.busy_since = time.monotonic()
        self._set_state(WorkerState.BUSY)

    def mark_warming(self) -> None:
        self._set_state(WorkerState.WARMING)

    def mark_idle(self) -> None:
        self.last_used = time.monotonic()
        self._set_state(WorkerState.IDLE)

    def stderr_tail(self) -> str:
        return self._stderr_tail.decode("utf-8", "replace")

    # -- lifecycle -------------------------------------------------------------

    async def start(self, timeout: float) -> None:
        """Spawns the process and runs the identity probe (our handshake)."""
        try:
            self.process = await self._launcher.launch(self._spec)
        except (OSError, ValueError) as exc:
            self.exit_cause = ExitCause.BOOT_FAILURE
            self._set_state(WorkerState.FAILED)
            self._set_state(WorkerState.DEAD)
            raise WorkerBootError(f"cannot start REPL {self._spec.argv!r}: {exc}") from exc
        self.pid = self.process.pid
        if self.state is not WorkerState.SPAWNING:
            # Killed while launching: nothing will read this process.
            kill_process_group(self.pid)
            await self.process.wait()
            raise WorkerCrashed(f"worker {self.name} was stopped while starting")
        try:
            self._psutil = psutil.Process(self.pid)
        except psutil.Error:
            self._psutil = None
        self._watch_exit()
        self._reader_task = asyncio.create_task(self._read_stdout(), name=f"{self.name}-stdout")
        self._stderr_task = asyncio.create_task(self._read_stderr(), name=f"{self.name}-stderr")
        try:
            response = await self._roundtrip_with_timeout({"cmd": IDENTITY_PROBE}, timeout)
        except (WorkerError, FramingError) as exc:
            await self._fail_boot()
            raise WorkerBootError(
                f"REPL {self._spec.argv!r} failed its boot probe: {exc.message if hasattr(exc, 'message') else exc}",
                detail=self.stderr_tail()[-2000:],
            ) from exc
        self.version_string = _version_from_probe(response)
        self._set_state(WorkerState.IDLE)

    def _watch_exit(self) -> None:
        """Kills the process group as soon as the REPL itself exits.

        A grandchild left behind (a shelled-out tool, `lake env`) keeps stdout
        open, so EOF alone would leave the worker half-alive and the orphan
        running.
        """
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # pragma: no cover - old kernel
            return
        loop = asyncio.get_running_loop()
        pid = self.pid

        def on_exit() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            kill_process_group(pid)

        loop.add_reader(pidfd, on_exit)

    async def _fail_boot(self) -> None:
        self.exit_cause = ExitCause.BOOT_FAILURE
        if self.state is WorkerState.SPAWNING:
            self._set_state(WorkerState.FAILED)
        if self.process is not None and self.process.returncode is None:
            kill_process_group(self.process.pid)
        await self._await_exit(5.0)
        if self.state is WorkerState.FAILED:
            self._set_state(WorkerState.DEAD)

    def kill(self, cause: ExitCause) -> None:
        """Kills the process group now; the reader finishes the worker."""
        if self.exit_cause is None:
            self.exit_cause = cause
        if self.state in (WorkerState.DEAD, WorkerState.FAILED):
            return
        if self.state is not WorkerState.STOPPING:
            self._set_state(WorkerState.STOPPING)
        if self.process is None:
            # Cancelled before its process existed: no reader will ever
            # finish it, and a STOPPING worker holds a pool slot.
            self._set_state(WorkerState.DEAD)
            self._exited.set()
            return
        if self.process.returncode is None:
            kill_process_group(self.process.pid)

    async def stop(self, grace: float, cause: ExitCause = ExitCause.SHUTDOWN) -> ShutdownRung:
        """Graded shutdown: close stdin, then SIGTERM, then SIGKILL; reaps."""
        import signal

        if self.exit_cause is None:
            self.exit_cause = cause
        if self.state in (WorkerState.DEAD, WorkerState.FAILED):
            return ShutdownRung.EXITED
        if self.process is None:
            # Still launching: end it now; start() then kills the new process.
            self.kill(cause)
            return ShutdownRung.EXITED
        if self.state is not WorkerState.STOPPING:
            self._set_state(WorkerState.STOPPING)
        if self.process.returncode is not None:
            await self._await_exit(grace)
            return ShutdownRung.EXITED
        rung = ShutdownRung.EOF
        try:
            if self.process.stdin is not None and not self.process.stdin.is_closing():
                self.process.stdin.close()
        except (OSError, RuntimeError):
            pass
        if not await self._wait_process(grace / 2):
            rung = ShutdownRung.TERM
            kill_process_group(self.process.pid, signal.SIGTERM)
            if not await self._wait_process(grace / 2):
                rung = ShutdownRung.KILL
                kill_process_group(self.process.pid, signal.SIGKILL)
                await self._wait_process(10.0)
        await self._await_exit(5.0)
        return rung

    async def _wait_process(self, timeout: float) -> bool:
        assert self.process is not None
        try:
            await asyncio.wait_for(asyncio.shield(self.process.wait()), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    async def _await_exit(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._exited.wait(), timeout)
        except asyncio.TimeoutError:
            if self.process is not None and self.process.returncode is None:
                kill_process_group(self.process.pid)
                await self._wait_process(5.0)

    # -- requests --------------------------------------------------------------

    async def request(self, payload: dict, timeout: float) -> dict:
        """Sends one request and returns the decoded response.

        Raises WorkerTimeout, WorkerOutOfMemory or WorkerCrashed; in each case
        the worker is already being killed. A cancellation of the caller also
        kills the worker (the REPL cannot abandon a command).
        """
        if self.state in (WorkerState.STOPPING, WorkerState.DEAD):
            raise WorkerCrashed(f"worker {self.name} is gone ({self.exit_cause and self.exit_cause.value})", stderr_tail=self.stderr_tail())
        if self.state not in (WorkerState.BUSY, WorkerState.WARMING):
            raise InternalError(f"worker {self.name}: request in state {self.state.value}")
        self._stderr_seen_at_request = self.stderr_bytes
        try:
            response = await self._roundtrip_with_timeout(payload, timeout)
        except asyncio.CancelledError:
            self.kill(ExitCause.CANCELLED)
            raise
        if self.stderr_bytes > self._stderr_seen_at_request and self.recycle_reason is None:
            # PANIC lines and the like: the answer stands, but the process may
            # be in a bad state; replace it after this request.
            self.recycle_reason = ExitCause.STDERR
        return response

    async def _roundtrip_with_timeout(self, payload: dict, timeout: float) -> dict:
        if self.process is None or self.process.stdin is None:
            raise InternalError(f"worker {self.name}: no process")
        if self._exited.is_set() or self.process.returncode is not None:
            raise WorkerCrashed(f"worker {self.name} has exited", stderr_tail=self.stderr_tail())
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending = future
        watcher = None
        if self._limits.max_worker_rss_mb > 0 and self._psutil is not None:
            watcher = asyncio.create_task(self._watch_memory(future), name=f"{self.name}-memwatch")
        try:
            data = encode_request(payload)
            return await asyncio.wait_for(self._roundtrip(data, future), timeout)
        except asyncio.TimeoutError:
            self.kill(ExitCause.TIMEOUT)
            raise WorkerTimeout(
                f"no answer within {timeout:.3g} s; worker {self.name} killed",
                stderr_tail=self.stderr_tail(),
            ) from None
        except (ConnectionResetError, BrokenPipeError) as exc:
            self.kill(ExitCause.CRASH)
            await self._await_exit(2.0)
            raise WorkerCrashed(
                f"worker {self.name} closed its input: {exc}{self._exit_description()}",
                stderr_tail=self.stderr_tail(),
            ) from None
        finally:
            self._pending = None
            if watcher is not None:
                watcher.cancel()

    async def _roundtrip(self, data: bytes, future: asyncio.Future) -> dict:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(data)
        await self.process.stdin.drain()
        return await future

    async def _watch_memory(self, future: asyncio.Future) -> None:
        limit = self._limits.max_worker_rss_mb * 2**20
        while not future.done():
            rss = self.tree_rss()
            if rss > limit:
                self.kill(ExitCause.OUT_OF_MEMORY)
                if not future.done():
                    future.set_exception(
                        WorkerOutOfMemory(
                            f"worker {self.name} used {rss / 2**20:.0f} MB, over the "
                            f"{self._limits.max_worker_rss_mb} MB limit; killed",
                            stderr_tail=self.stderr_tail(),
                        )
                    )
                return
            await asyncio.sleep(self._limits.memory_poll_s)

    def tree_rss(self) -> int:
        """Resident memory of the process and all its descendants, in bytes."""
        if self._psutil is None:
            return 0
        try:
            # Listing descendants scans all of /proc (milliseconds). A process
            # tree (monitor -> lake -> repl) is set at boot, so refresh the
            # list at most once a second.
            now = time.monotonic()
            if now - self._children_listed_at >= 1.0:
                self._children = self._psutil.children(recursive=True)
                self._children_listed_at = now
        except psutil.Error:
            return 0
        # Anonymous + shared memory, memfds held open included: see worker/memory.py.
        return tree_memory_of(self._psutil, self._children)

    # -- header and preamble ---------------------------------------------------

    async def load_header(self, imports: str, import_key: str, timeout: float) -> float:
        """Loads the import header (once per process); returns seconds spent."""
        if self.import_key is not None:
            raise InternalError(f"worker {self.name} already holds a header")
        started = time.monotonic()
        self.loading_key = import_key
        try:
            response = await self.request({"cmd": imports}, timeout)
        finally:
            self.loading_key = None
        if "env" not in response:
            raise HeaderLoadError(f"header failed to load: {response.get('message', response)!r}")
        errors = [m for m in response.get("messages", []) if m.get("severity") == "error"]
        if errors:
            raise HeaderLoadError("header failed to load", messages=response.get("messages", []))
        env = response["env"]
        probe = await self.request({"cmd": HEADER_PROBE, "env": env}, timeout)
        probe_errors = [m for m in probe.get("messages", []) if m.get("severity") == "error"]
        if "env" not in probe or probe_errors:
            detail = probe.get("message") or "; ".join(m.get("data", "") for m in probe_errors)
            raise HeaderLoadError(
                "header failed to load: an import could not be resolved (the REPL returned an "
                f"empty environment; probe said: {detail[:300]})"
            )
        self.import_key = import_key
        self.imports_env = env
        return time.monotonic() - started

    async def probe_fork(self, timeout: float) -> bool:
        """Whether this REPL is the augustepoiroux fork (incrementality).

        Only the fork knows `declarations`; upstream ignores unknown keys.
        Run before any header, on a worker that is about to go IDLE.
        """
        response = await self._roundtrip_with_timeout({"cmd": FORK_PROBE, "declarations": True}, timeout)
        return "declarations" in response

    def cached_base_env(self, preamble_key: str) -> int | None:
        """The env a body with this preamble would run on, if already built."""
        if not preamble_key:
            return self.imports_env
        return self.preamble_envs.get(preamble_key)

    async def ensure_preamble(self, preamble: str, preamble_key: str, timeout: float) -> tuple[int, float]:
        """Returns the env for this preamble on the loaded header, and time spent."""
        if self.imports_env is None:
            raise InternalError(f"worker {self.name}: preamble before header")
        if not preamble_key:
            return self.imports_env, 0.0
        env = self.preamble_envs.get(preamble_key)
        if env is not None:
            self.preamble_envs.move_to_end(preamble_key)
            return env, 0.0
        started = time.monotonic()
        response = await self.request({"cmd": preamble, "env": self.imports_env}, timeout)
        if "env" not in response:
            raise HeaderLoadError(f"header failed to load: {response.get('message', response)!r}")
        errors = [m for m in response.get("messages", []) if m.get("severity") == "error"]
        if errors:
            raise HeaderLoadError("header (open/set_option lines) failed", messages=response["messages"])
        self.preamble_envs[preamble_key] = response["env"]
        while len(self.preamble_envs) > 16:
            self.preamble_envs.popitem(last=False)
        return response["env"], time.monotonic() - started

    def remember_body(self, base_env: int, text: str, tag: object = None) -> list[object]:
        """Records a body elaborated on `base_env`; returns the tags of bodies
        the bounded history forgot to make room (oldest first)."""
        key = f"{base_env}\x00{text}"
        if key in self.history:
            return []
        self.history.insert(key, None)
        self._history_order.append((key, tag))
        forgotten = []
        while len(self._history_order) > self._history_limit:
            old_key, old_tag = self._history_order.popleft()
            self.history.remove(old_key)
            forgotten.append(old_tag)
        return forgotten

    def history_tags(self) -> list[object]:
        return [tag for _key, tag in self._history_order]

    def reusable_prefix(self, base_env: int | None, text: str) -> int:
        """Characters of `text` this worker elaborated before on `base_env`."""
        if base_env is None or not len(self.history):
            return 0
        prefix = f"{base_env}\x00"
        length = self.history.common_prefix_length(prefix + text) - len(prefix)
        if length <= 0:
            return 0
        # Lean reuses whole commands; snap back to a line start.
        cut = text.rfind("\n", 0, length)
        return 0 if cut < 0 else cut + 1

    # -- pipes -----------------------------------------------------------------

    async def _read_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        try:
            while True:
                chunk = await stdout.read(_READ_CHUNK)
                if not chunk:
                    break
                try:
                    frames = self._decoder.feed(chunk)
                    for frame in frames:
                        self._on_frame(decode_frame(frame))
                except FramingError as exc:
                    self._on_garbage(str(exc))
                    break
        except Exception as exc:  # pragma: no cover - defensive
            log.exception("worker %s: stdout reader failed", self.name)
            self._on_garbage(f"reader failed: {exc}")
        await self._on_eof()

    def _on_frame(self, response: dict) -> None:
        future = self._pending
        if future is None or future.done():
            self._on_garbage(f"unsolicited output: {str(response)[:200]}")
            return
        self._pending = None
        future.set_result(response)

    def _on_garbage(self, what: str) -> None:
        log.warning("worker %s printed garbage (%s); killing it", self.name, what)
        self.kill(ExitCause.GARBAGE)
        future = self._pending
        if future is not None and not future.done():
            future.set_exception(
                WorkerCrashed(f"worker {self.name} printed unparseable output: {what}", stderr_tail=self.stderr_tail())
            )

    async def _on_eof(self) -> None:
        # Finish only after both stdout EOF and process exit (uvloop's order),
        # so the exit status and the whole stderr tail are in the report.
        assert self.process is not None
        try:
            await asyncio.wait_for(self.process.wait(), 5.0)
        except asyncio.TimeoutError:
            kill_process_group(self.process.pid)
            await self.process.wait()
        if self._stderr_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        self.returncode = self.process.returncode
        tail = self.stderr_tail()
        if self.exit_cause is None:
            # An allocation refused under the address-space rlimit ends the
            # process; its last words say so. Not retried: it would recur.
            out_of_memory = any(marker in tail[-4000:] for marker in _OUT_OF_MEMORY_MARKERS)
            self.exit_cause = ExitCause.OUT_OF_MEMORY if out_of_memory else ExitCause.CRASH
        future = self._pending
        if future is not None and not future.done():
            if self.exit_cause is ExitCause.OUT_OF_MEMORY:
                error: WorkerError = WorkerOutOfMemory(
                    f"worker {self.name} ran out of memory{self._exit_description()}", stderr_tail=tail
                )
            else:
                error = WorkerCrashed(f"worker {self.name} died{self._exit_description()}", stderr_tail=tail)
            future.set_exception(error)
        if self.state not in (WorkerState.DEAD,):
            if self.state not in (WorkerState.STOPPING, WorkerState.FAILED):
                self._set_state(WorkerState.STOPPING)
            self._set_state(WorkerState.DEAD)
        self._exited.set()

    def _exit_description(self) -> str:
        code = self.process.returncode if self.process is not None else None
        if code is None:
            return ""
        if code < 0:
            import signal

            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            hint = " (perhaps out of memory?)" if name == "SIGKILL" and self.exit_cause is ExitCause.CRASH else ""
            return f" (killed by {name}{hint})"
        return f" (exit status {code})"

    async def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        stderr = self.process.stderr
        while True:
            chunk = await stderr.read(_READ_CHUNK)
            if not chunk:
                return
            self.stderr_bytes += len(chunk)
            self._stderr_tail += chunk
            if len(self._stderr_tail) > STDERR_TAIL_BYTES:
                del self._stderr_tail[: len(self._stderr_tail) - STDERR_TAIL_BYTES]


def _version_from_probe(response: dict) -> str:
    for message in response.get("messages", []):
        if message.get("severity") == "info":
            return str(message.get("data", "")).strip().strip('"')
    return ""
