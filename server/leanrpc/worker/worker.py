"""One REPL worker: the state machine over a process and its channel.

    SPAWNING -> PROBING -> READY -> LOADING -> IDLE <-> RESERVED -> RUNNING
                                       ^          \\______/    |        |
                                       +---------------------+        v
    any live state -> DRAINING (finish this job, then stop) -> STOPPING -> DEAD
    SPAWNING / PROBING -> FAILED (could not boot) -> DEAD

Owns: the one `_set_state` over the transition table (data, worker/states.py),
the worker's Lean-level facts (import header, version), when the handshake and a header load
run (their exchanges: worker/handshake.py),
when the memory watch runs (worker/memwatch.py: during a request), and the pool-facing verbs
`reserve()`, `begin_loading()`, `release()`, `drain()`, `kill()`, `stop()`.
May import: leanrpc.repl, leanrpc.worker.{process,channel,launcher,memwatch,states,handshake},
leanrpc.config, leanrpc.errors. Not the pool.
Why one room: the state machine and the verbs that drive it are one lifecycle (every transition
goes through `_set_state` here; the table is data in worker/states.py).

A Worker lives exactly as long as its process: after a kill or a crash it is DEAD and the pool
makes a new one. Any doubt (timeout, garbage or unsolicited output, a failed fence or audit,
memory over the limit, a cancel mid-request) kills it; the REPL cannot cancel work or
resynchronise, so a doubtful worker is never reused (STYLE.md lessons 4, 5, 13).

The header envs it loads are written into the map it is given (`headers`): the pool's slot for
this worker owns it and drops it at DEAD with every other REPL handle (pool/slot.py).
"""

from __future__ import annotations

import asyncio
import logging
import time

from .. import repl
from ..config import LimitsConfig
from ..errors import (
    InternalError,
    WorkerBootError,
    WorkerCrashed,
    WorkerError,
    WorkerOutOfMemory,
)
from .channel import Channel
from .fence import FenceSettings
from .handshake import boot_probes, import_header
from .launcher import Launcher, LaunchSpec
from .memwatch import MemoryWatch
from .process import ReplProcess, ShutdownRung
from .states import (
    _HELD,
    _LIVE,
    _MAY_EXCHANGE,
    _TRANSITIONS,
    ExitCause,
    WorkerState,
    cause_of,
    last_stderr_line,
)

__all__ = ["ExitCause", "Worker", "WorkerState", "last_stderr_line"]
S = WorkerState

log = logging.getLogger("leanrpc.worker")


class Worker:
    """Owns one REPL process. Changes state only through `_set_state`."""

    def __init__(
        self,
        name: str,
        spec: LaunchSpec,
        launcher: Launcher,
        limits: LimitsConfig,
        *,
        on_state_change=None,
        fence=None,
        profile: str = "",
        headers: dict[str, int] | None = None,
    ) -> None:
        self.name = name
        self.profile = profile  # the REPL profile (toolchain) it runs, for life
        self._limits = limits
        self._on_state_change = on_state_change
        self.state = S.SPAWNING
        self._process = ReplProcess(name, spec, launcher)
        self._memory = MemoryWatch(
            name, limits, self._process, self.stderr_tail, on_over=self._out_of_memory
        )
        self._channel = Channel(
            name,
            self._process,
            max_frame=limits.max_frame_mb * 2**20,
            settings=fence
            if isinstance(fence, FenceSettings)
            else FenceSettings.from_config(fence),
            on_poison=self._on_poison,
            over_memory=self._memory.verdict,
        )
        self.started_at = time.monotonic()
        self.last_used = time.monotonic()
        self.requests_served = 0
        # Every header this process imported -> its env. A REPL keeps every
        # env for life, so a worker serves each of them without reloading.
        # The map is the pool slot's (pool/slot.py), which drops it at DEAD.
        self.headers: dict[str, int] = {} if headers is None else headers
        self.import_key: str | None = None  # the header last loaded or used
        self.loading_key: str | None = None  # the header being loaded (routing counts it)
        self.imports_env: int | None = None  # the env of import_key
        self.rss_at_release = 0  # tree memory at the last exact release read (0: not measured)
        self.busy_since = 0.0  # routing estimate of the current job
        self.expected_busy_s = 0.0
        self.version_string = ""
        self.is_fork: bool | None = None
        self.exit_cause: ExitCause | None = None
        self._drain_cause: ExitCause | None = None
        self._stopped = asyncio.Event()
        self._finisher: asyncio.Task | None = None

    # -- state -----------------------------------------------------------------

    def _set_state(self, new: WorkerState) -> None:
        if new is self.state:
            return
        if new not in _TRANSITIONS[self.state]:
            raise InternalError(
                f"worker {self.name}: illegal transition {self.state.value} -> {new.value}"
            )
        old, self.state = self.state, new
        if self._on_state_change is not None:
            self._on_state_change(self, old, new)

    @property
    def alive(self) -> bool:
        return self.state in _LIVE

    @property
    def busy(self) -> bool:
        """Held by the pool for a job (reserved, running, or draining)."""
        return self.state in _HELD

    @property
    def reserved(self) -> bool:
        """Held by the pool: busy, or loading a header for a job."""
        return self.state in _HELD or self.state is S.LOADING

    @property
    def recycle_reason(self) -> ExitCause | None:
        """Why the worker is DRAINING (to be stopped at release), if it is."""
        return self._drain_cause

    @property
    def header_key(self) -> str | None:
        return self.import_key if self.import_key is not None else self.loading_key

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def process(self) -> asyncio.subprocess.Process | None:
        return self._process.process

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    @property
    def stderr_bytes(self) -> int:
        return self._process.stderr_bytes

    @property
    def fenced(self) -> bool:
        return self._channel.settings.fence

    @property
    def audited(self) -> bool:
        return self._channel.audited

    @property
    def poisoned_why(self) -> str:
        """Why the channel stopped believing this REPL ("" if it did not): its exit line says it."""
        return self._channel.poisoned or ""

    def stderr_tail(self) -> str:
        return self._process.stderr_tail()

    def tree_rss(self) -> int:
        return self._process.tree_rss()

    def memory_at_release(self, limit: int) -> int:
        """Tree memory for the release decision (ReplProcess.memory_at_release): exact ones kept."""
        value, exact = self._process.memory_at_release(limit, len(self.headers))
        if exact:
            self.rss_at_release = value
        return value

    # -- pool verbs --------------------------------------------------------------

    def reserve(self) -> None:
        """The pool takes this worker for a job (from READY, IDLE or LOADING)."""
        if self.state is not S.RESERVED:
            self.busy_since = time.monotonic()
        self._set_state(S.RESERVED)

    def begin_loading(self) -> None:
        self._set_state(S.LOADING)

    def release(self) -> ExitCause | None:
        """Back to IDLE; or, when DRAINING, the cause to stop it for (the
        caller stops it; the state stays DRAINING until then)."""
        if self.state is S.DRAINING:
            return self._drain_cause
        self.last_used = time.monotonic()
        self._set_state(S.IDLE)
        return None

    def drain(self, cause: ExitCause) -> None:
        """No new work: finish the current job, then stop (an idle one stops now)."""
        if self._drain_cause is None:
            self._drain_cause = cause
        if self.state is S.IDLE or self.state is S.READY:
            self.kill(cause)
        elif self.state in (S.LOADING, S.RESERVED, S.RUNNING):
            self._set_state(S.DRAINING)

    # -- lifecycle -------------------------------------------------------------

    async def start(self, timeout: float, *, probe_fork: bool = False) -> None:
        """Spawns the process and runs the handshake (identity probe, and the
        fork probe when asked), then READY. Raises WorkerBootError."""
        try:
            await self._process.launch()
        except (OSError, ValueError) as exc:
            self.exit_cause = ExitCause.BOOT_FAILURE
            self._set_state(S.FAILED)
            self._set_state(S.DEAD)
            self._stopped.set()
            raise WorkerBootError(f"cannot start REPL {self._process.argv!r}: {exc}") from exc
        self._channel.start()
        self._finisher = asyncio.create_task(self._finish_when_gone(), name=f"{self.name}-finish")
        if self.state is not S.SPAWNING:
            # Stopped while launching: nothing will use this process.
            self._process.kill()
            await self._process.reap()
            raise WorkerCrashed(f"worker {self.name} was stopped while starting")
        self._set_state(S.PROBING)
        try:
            version, is_fork = await boot_probes(self._channel, timeout, probe_fork)
        except WorkerError as exc:
            await self._fail_boot()
            cause = last_stderr_line(self.stderr_tail())
            raise WorkerBootError(
                f"REPL {self._process.argv!r} failed its boot probe: {exc.message}"
                + (f": {cause}" if cause and cause not in exc.message else ""),
                detail=self.stderr_tail()[-2000:],
            ) from exc
        if self.state is not S.PROBING:  # killed meanwhile
            raise WorkerCrashed(f"worker {self.name} was stopped while starting")
        self.version_string, self.is_fork = version, is_fork
        if self._process.memory is not None:
            self._process.memory.use_own_cgroup()
        self._memory.start()
        self._set_state(S.READY)

    async def _fail_boot(self) -> None:
        self.exit_cause = self.exit_cause or ExitCause.BOOT_FAILURE
        if self.state in (S.SPAWNING, S.PROBING):
            self._set_state(S.FAILED)
        self._process.kill()
        await self._stopped_or_timeout(5.0)

    def kill(self, cause: ExitCause) -> None:
        """Kills the process group now; the finisher makes the worker DEAD."""
        if self.exit_cause is None:
            self.exit_cause = cause
        if self.state in (S.DEAD, S.FAILED):
            return
        if self.state is not S.STOPPING:
            self._set_state(S.STOPPING)
        if self._process.process is None:
            # Cancelled before its process existed: no finisher will run, and
            # a STOPPING worker holds a pool slot.
            self._set_state(S.DEAD)
            self._stopped.set()
            return
        self._process.kill()

    async def stop(self, grace: float, cause: ExitCause = ExitCause.SHUTDOWN) -> ShutdownRung:
        """Graded shutdown: close stdin, then SIGTERM, then SIGKILL; reaps."""
        if self.exit_cause is None:
            self.exit_cause = cause
        if self.state in (S.DEAD, S.FAILED):
            return ShutdownRung.EXITED
        if self._process.process is None:
            self.kill(cause)  # still launching: start() kills the new process
            return ShutdownRung.EXITED
        if self.state is not S.STOPPING:
            self._set_state(S.STOPPING)
        rung = await self._process.stop(grace)
        await self._stopped_or_timeout(5.0)
        return rung

    async def _stopped_or_timeout(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._stopped.wait(), timeout)
        except asyncio.TimeoutError:
            self._process.kill()
            await self._process.reap()

    def _on_poison(self, why: str, cause: str) -> None:
        if self.exit_cause is None:
            self.exit_cause = ExitCause(cause)
        if self.state in _LIVE:
            self._set_state(S.STOPPING)

    async def _finish_when_gone(self) -> None:
        """DEAD only after stdout EOF and the exit status (uvloop's order)."""
        await self._channel.eof.wait()
        await self._process.reap()
        self._memory.stop()
        if self.exit_cause is None:
            # An allocation refused under the address-space rlimit ends the
            # process; its last words say so. Not retried: it would recur.
            self.exit_cause = (
                ExitCause.OUT_OF_MEMORY if self._process.out_of_memory_words() else ExitCause.CRASH
            )
        if self.state is not S.DEAD:
            if self.state not in (S.STOPPING, S.FAILED):
                self._set_state(S.STOPPING)
            self._set_state(S.DEAD)
        self._stopped.set()

    # -- requests --------------------------------------------------------------

    async def request(self, payload: repl.Request | dict, timeout: float) -> repl.Response:
        """Sends one command; returns its proven answer (a `repl.Response`).

        Raises WorkerTimeout, WorkerOutOfMemory or WorkerCrashed (and its
        WorkerPoisoned); in each case the worker is already being killed. A
        cancellation of the caller also kills the worker (the REPL cannot
        abandon a command).
        """
        return await self._guarded(lambda: self._channel.exchange(payload, timeout))

    @property
    def next_env(self) -> int:
        """The env id this worker's REPL allocates for its next command (the channel's counter)."""
        return self._channel.next_env

    async def request_batch(
        self,
        payloads: list,
        timeout: float,
        total: float | None = None,
        arrivals: list | None = None,
    ) -> list:
        """Several commands pipelined (written at once, one fence, one audit;
        worker/channel.py `exchange_batch`); their proven answers in order
        (`arrivals`, when given, gets the time.monotonic() of each). Raises and kills
        exactly as `request`."""
        return await self._guarded(
            lambda: self._channel.exchange_batch(payloads, timeout, total, arrivals)
        )

    async def _guarded(self, exchange):
        """One exchange (single or batch) under the worker's rules: refused when
        gone, RUNNING while it lasts, killed on any error or cancellation, and
        drained after it when the REPL wrote to stderr."""
        if self.state in (S.STOPPING, S.DEAD, S.FAILED) or self._channel.poisoned is not None:
            raise WorkerCrashed(
                f"worker {self.name} is gone ({self.exit_cause and self.exit_cause.value})"
                f"{await self._process.exit_description()}",
                stderr_tail=self.stderr_tail(),
            )
        if self.state not in _MAY_EXCHANGE:
            raise InternalError(f"worker {self.name}: request in state {self.state.value}")
        running = self.state is S.RESERVED
        if running:
            self._set_state(S.RUNNING)
        stderr_before = self._process.stderr_bytes
        self._memory.exchanging(True)
        try:
            answer = await exchange()
        except asyncio.CancelledError:
            self.kill(ExitCause.CANCELLED)
            raise
        except WorkerError as exc:
            self.kill(cause_of(exc))
            raise
        finally:
            self._memory.exchanging(False)
        if running and self.state is S.RUNNING:
            self._set_state(S.RESERVED)
        if self._process.stderr_bytes > stderr_before:
            # PANIC lines and the like: the answer stands, but the process may
            # be in a bad state; replace it after this job.
            self.drain(ExitCause.STDERR)
        return answer

    def _out_of_memory(self, over: WorkerOutOfMemory) -> None:
        """The memory watch saw the tree over its limit while a command ran."""
        self.kill(ExitCause.OUT_OF_MEMORY)
        self._channel.fail_pending(over)

    # -- header ------------------------------------------------------------------

    @property
    def header_keys(self) -> tuple[str, ...]:
        return tuple(self.headers)

    def holds(self, import_key: str) -> bool:
        return import_key in self.headers

    def header_env(self, import_key: str) -> int | None:
        """The env of a header this worker imported, or None."""
        return self.headers.get(import_key)

    def use_header(self, import_key: str) -> int:
        """Makes a held header the current one; returns its env."""
        self.import_key, self.imports_env = import_key, self.headers[import_key]
        return self.imports_env

    async def load_header(self, imports: str, import_key: str, timeout: float) -> float:
        """Imports a header in this process, next to those it holds (a
        command without `env`); returns seconds spent."""
        if import_key in self.headers:
            raise InternalError(f"worker {self.name} already holds this header")
        started = time.monotonic()
        self.loading_key = import_key
        try:
            env = await import_header(self.request, imports, timeout)
        finally:
            self.loading_key = None
        self.headers[import_key] = env
        self.use_header(import_key)
        return time.monotonic() - started
