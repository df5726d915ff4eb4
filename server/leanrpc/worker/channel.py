"""The exchange channel: one pending command, proven answers, poison on doubt.

    exchange(request) --encode(request) + encode(fence(nonce))--> REPL stdin
                      <--frame: the answer, frame: fence answer--  REPL stdout
                      then: env counter check, /proc audit (PipeAudit)

Owns: the stdout reader and its `FrameDecoder`, the single pending exchange
(which frame is which is worker/pending.py's rule), the fence (issue 15 item
1), the audit call, timeouts, and poisoning: any
unsolicited byte (while idle, or a second frame inside one exchange), a
missing or wrong fence answer, an env id the REPL should not have allocated,
a proof state it did not allocate (the id counters are worker/ledger.py's:
REPL-PROTOCOL.md section 6, new ids are the next ones, in order), or a failed
audit kills the process and fails the pending exchange with
`WorkerPoisoned`, which the pool retries on a fresh worker.
An answer is returned only after its fence answer and the audit confirmed it,
so no result is ever delivered unconfirmed.
May import: leanrpc.repl, leanrpc.core.framing, leanrpc.errors, leanrpc.worker.fence (how much it checks),
leanrpc.worker.process, leanrpc.worker.audit, leanrpc.worker.ledger (the id counters),
leanrpc.worker.stdout (the bytes, in the callback that read them), leanrpc.worker.pending
(the pending exchange and which frame is which), leanrpc.worker.pipes (`write_input`).
Knows no worker states.
Why one room: the pending exchange, its fence, the audit and poisoning on doubt are one
protocol: a byte's meaning depends on all of them at once, and splitting them would put
"any doubt poisons" in two places (the frame rule and the id counters are already out).

With `fence = "off"` (fully trusted input) the channel still takes exactly
one frame per command and poisons on unsolicited output, as before the fence.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from .. import repl
from ..core.framing import FrameDecoder
from ..errors import (
    FramingError,
    WorkerCrashed,
    WorkerError,
    WorkerOutOfMemory,
    WorkerPoisoned,
    WorkerTimeout,
)
from . import pending as pending_frames
from . import stdout
from .audit import PipeAudit, ProcessGone, audit_available
from .fence import FenceSettings
from .ledger import Ledger
from .pipes import write_input
from .process import ReplProcess

log = logging.getLogger("leanrpc.worker")


class Channel:
    """Speaks the protocol over one `ReplProcess`'s pipes."""

    def __init__(
        self,
        name: str,
        process: ReplProcess,
        *,
        max_frame: int,
        settings: FenceSettings,
        on_poison: Callable[[str, str], None],  # (why, ExitCause value)
        over_memory: Callable[[], WorkerError | None] = lambda: None,
    ) -> None:
        self.name = name
        self._process = process
        # Asked when the time runs out, before the kill: a tree already over
        # its memory limit is OUT_OF_MEMORY, whether or not the memory watch
        # (a poll) has seen it yet; the verdict follows the process, not the poll.
        self._over_memory = over_memory
        self._decoder = FrameDecoder(max_frame=max_frame)
        self.settings = settings
        self._on_poison = on_poison
        self._pending: pending_frames.Exchange | None = None
        self._stdout = stdout.Reading()  # the stdout reading (worker/stdout.py), once started
        self._closed: asyncio.Future | None = None  # the end of stdout, handled (_on_eof)
        self.poisoned: str | None = None  # why, once poisoned
        self.eof = asyncio.Event()
        self.ledger = Ledger()  # the env and proof-state ids the REPL must allocate next
        self.exchanges = 0
        self.batches = 0  # pipelined exchanges (several commands, one fence)
        self.stdout_bytes = 0  # bytes read from the REPL's stdout so far
        self._audit: PipeAudit | None = None

    def start(self) -> None:
        self._stdout = stdout.attach(
            self._process.process, self._on_chunk, self._on_stdout_closed, self.name
        )

    async def enable_audit(self) -> None:
        """Called once the handshake answered: the tree is as it will idle."""
        if not self.settings.fence or self.settings.audit == "off":
            return
        pid = self._process.pid
        if not audit_available(pid):
            if self.settings.audit == "on":
                raise WorkerError(
                    f'worker {self.name}: fence_audit = "on" but /proc/{pid} threads are unreadable'
                )
            log.warning(
                "worker %s: /proc/%s is unreadable; the fence runs without the thread audit",
                self.name,
                pid,
            )
            return
        self._audit = PipeAudit(
            pid, self._process.pipe_inodes, self.settings.thread_allowance, self.settings.settle_s
        )
        try:
            problem = await self._audit.record_baseline()
        except ProcessGone:
            await self._raise_gone()
        if problem is not None:
            self.poison(f"audit at warm-up: {problem}")
            raise WorkerPoisoned(
                f"worker {self.name} failed its warm-up audit: {problem}",
                stderr_tail=self._process.stderr_tail(),
            )

    @property
    def audited(self) -> bool:
        return self._audit is not None

    # -- exchanges -------------------------------------------------------------

    async def exchange(self, request: repl.Request | dict, timeout: float) -> repl.Response:
        """Sends `request` and returns its proven answer.

        Raises WorkerTimeout, WorkerCrashed (WorkerPoisoned included) or
        WorkerOutOfMemory; the process is already being killed then.
        """
        # The loop reads; what the thread read between batches goes first, to no exchange.
        self._stdout.direct()
        if self.poisoned is not None:
            raise WorkerPoisoned(
                f"worker {self.name} is poisoned: {self.poisoned}",
                stderr_tail=self._process.stderr_tail(),
            )
        if self._pending is not None:
            raise WorkerError(f"worker {self.name}: a second exchange while one is pending")
        await self._raise_if_gone()
        data = repl.encode(request)
        nonce = None
        if self.settings.fence:
            nonce = repl.new_nonce()
            data += repl.encode(repl.fence_request(nonce))
        loop = asyncio.get_running_loop()
        pending = self._pending = pending_frames.Exchange(loop.create_future(), nonce)
        received_before = self.stdout_bytes
        # One timer on the pending future instead of wait_for (a task per
        # exchange): the pipe takes the command whole in the usual case, so
        # there is nothing to drain; a full pipe falls back to wait_for.
        timer = loop.call_later(timeout, self._expire, pending.future)
        try:
            await self._send(data, pending, timeout, timeout)
        finally:
            timer.cancel()
            self._pending = None
        response = pending.future.result()
        self.exchanges += 1
        self._check(self.ledger.proof_states(request, response))
        if self.settings.fence:
            await self._confirm(request, response, len(data), self.stdout_bytes - received_before)
        return response

    async def exchange_batch(
        self,
        requests: list,
        timeout: float,
        total: float | None = None,
        arrivals: list | None = None,
    ) -> list:
        """Pipelined exchange: every command of `requests` written at once, then
        ONE fence; returns their proven answers, in order.

        The fence's guarantee holds for the whole batch: exactly one frame per
        command, in order, then the fence answer; a missing, extra, forged or
        foreign-fenced frame anywhere poisons the worker, and the env and
        proof-state counters are checked answer by answer in order (an answer
        out of its place names an id that is not the next one). ONE audit
        vouches for all of it. `timeout` is per command (the timer restarts at
        each answer: the REPL starts a command when it finished the one
        before); `total` bounds the whole batch. `arrivals`, when given, gets
        the time.monotonic() each answer came. Raises as `exchange`; an error in the
        batch says which command it came during (`batch_index`: the answers
        before it came, unconfirmed, and none is delivered).
        """
        if len(requests) == 1:
            return [await self.exchange(requests[0], min(timeout, total) if total else timeout)]
        self._stdout.flush()  # what was read between batches is no exchange's: it poisons
        if self.poisoned is not None:
            raise WorkerPoisoned(
                f"worker {self.name} is poisoned: {self.poisoned}",
                stderr_tail=self._process.stderr_tail(),
            )
        if self._pending is not None:
            raise WorkerError(f"worker {self.name}: a second exchange while one is pending")
        await self._raise_if_gone()
        data = b"".join(repl.encode(r) for r in requests)
        nonce = None
        if self.settings.fence:
            nonce = repl.new_nonce()
            data += repl.encode(repl.fence_request(nonce))
        loop = asyncio.get_running_loop()
        started = loop.time()
        pending = self._pending = pending_frames.Exchange(
            loop.create_future(), nonce, expected=len(requests), progress_at=started
        )
        end = None if total is None else started + total
        received_before = self.stdout_bytes
        timer = [None]

        def check_time() -> None:
            self._stdout.flush()  # the answers read so far: each one restarts the timer
            if pending.future.done():
                return
            due = pending.progress_at + timeout
            if end is not None:
                due = min(due, end)
            now = loop.time()
            if now >= due:
                pending.future.set_exception(asyncio.TimeoutError())
            else:
                timer[0] = loop.call_later(due - now, check_time)

        timer[0] = loop.call_later(timeout if end is None else min(timeout, total), check_time)
        try:
            drain = timeout * len(requests) if end is None else max(0.0, end - loop.time())
            await self._send(data, pending, timeout, drain, batch=True)
        finally:
            timer[0].cancel()
            self._pending = None
        responses = list(pending.future.result())
        if arrivals is not None:
            arrivals.extend(pending.arrivals)
        self.exchanges += 1
        self.batches += 1
        for request, response in zip(requests, responses):
            self._check(self.ledger.kind(request, response))
            self._check(self.ledger.proof_states(request, response))
            self._check(self.ledger.env(request, response))
        if self.settings.fence:
            await self._confirm(None, None, len(data), self.stdout_bytes - received_before)
        return responses

    @property
    def next_env(self) -> int:
        """The env id the REPL allocates for its next command."""
        return self.ledger.next_env

    def _check(self, problem: str | None) -> None:
        if problem is not None:
            self._poison_raise(problem)

    def fail_pending(self, error: WorkerError) -> None:
        """Fails the exchange in flight (memory watch, kill by the worker), after the answers
        read so far (a batch's error names the command it came during by their count)."""
        self._stdout.flush()
        pending = self._pending
        if pending is not None and not pending.future.done():
            pending.future.set_exception(error)

    async def _send(
        self,
        data: bytes,
        pending: pending_frames.Exchange,
        timeout: float,
        drain: float,
        *,
        batch: bool = False,
    ) -> None:
        """Writes `data` and waits for `pending`'s answer: the part both exchanges share
        (their timers are their own). `drain`: how long a full pipe may take to drain. With
        `batch`, an error says which command it came during (`batch_index`: the answers
        before it came, unconfirmed; len(requests) is the fence); the batch itself (a snippet
        and its own checks) is internal: not named.
        Raises WorkerTimeout (or the memory verdict), WorkerCrashed; the process is
        already being killed then."""
        if batch:
            self._stdout.batch(pending.nonce)  # the loop is woken when the fence's answer came
        try:
            stdin = self._process.process.stdin
            write_input(stdin, data)
            if stdin.transport.get_write_buffer_size():
                # The drain alone is bounded here: the answer's own timers (which take every
                # byte read first) bound the rest, and the pending future is never cancelled.
                await asyncio.wait_for(stdin.drain(), drain)
            await pending.future
        except asyncio.TimeoutError:
            if not pending.future.done():  # the drain's limit: the answers read so far count
                self._stdout.flush()
            over = self._over_memory()
            self._process.kill()
            raise over or WorkerTimeout(
                f"no answer within {timeout:.3g} s; worker {self.name} killed",
                stderr_tail=self._process.stderr_tail(),
                batch_index=len(pending.frames) if batch else None,
            ) from None
        except (ConnectionResetError, BrokenPipeError) as exc:
            self._process.kill()
            raise WorkerCrashed(
                f"worker {self.name} closed its input: {exc}{await self._process.exit_description(2.0)}",
                stderr_tail=self._process.stderr_tail(),
                batch_index=len(pending.frames) if batch else None,
            ) from None
        except WorkerError as exc:  # a crash, poison or memory verdict while answers came
            if batch and getattr(exc, "batch_index", None) is None:
                exc.batch_index = len(pending.frames)
            raise
        finally:
            if batch:
                self._stdout.rest()  # between batches every byte is seen as it comes

    async def _confirm(self, request, response: repl.Response, sent: int, received: int) -> None:
        """Env counter and audit, after the fence answered."""
        if response is not None:
            self._check(self.ledger.env(request, response))
        if self._audit is not None:
            try:
                problem = await self._audit.check(sent, received)
            except ProcessGone:
                # Died before the audit could vouch for the answer: not
                # delivered (a thief could kill the REPL to skip the audit).
                await self._raise_gone()
            if problem is not None:
                self._poison_raise(f"audit: {problem}")
            if self.poisoned is not None:  # something arrived while we audited
                raise WorkerPoisoned(
                    f"worker {self.name} poisoned: {self.poisoned}; its answer is not trusted",
                    stderr_tail=self._process.stderr_tail(),
                )

    def _poison_raise(self, why: str) -> None:
        self.poison(why)
        raise WorkerPoisoned(
            f"worker {self.name} poisoned: {why}; its answer is not trusted",
            stderr_tail=self._process.stderr_tail(),
        )

    async def _raise_if_gone(self) -> None:
        if self.eof.is_set() or self._process.returncode is not None:
            await self._raise_gone()

    async def _raise_gone(self) -> None:
        self._process.kill()
        raise WorkerCrashed(
            f"worker {self.name} has exited{await self._process.exit_description()}",
            stderr_tail=self._process.stderr_tail(),
        )

    # -- poison ----------------------------------------------------------------

    def poison(self, why: str, *, cause: str = "poisoned") -> None:
        """Never trust this process again: kill it; fail what is pending.

        `cause` (an ExitCause value, for the worker's restart count): "garbage"
        when the REPL printed something that is no answer at all (unparseable or
        unsolicited output), counted apart from fence failures ("poisoned");
        "cancelled" for the late answer to a command its caller cancelled (the
        worker is being killed for the cancellation, not for its output). The
        worker's exit line says why (pool/supervisor.py), so this logs at debug.
        """
        if self.poisoned is None:
            self.poisoned = why
            log.debug("worker %s poisoned: %s", self.name, why)
        self._on_poison(why, cause)
        self._process.kill()
        self.fail_pending(
            WorkerPoisoned(
                f"worker {self.name} poisoned: {why}", stderr_tail=self._process.stderr_tail()
            )
        )

    # -- stdout ----------------------------------------------------------------

    def _expire(self, future: asyncio.Future) -> None:
        """A single exchange's timer: the bytes read so far first (the answer may be in them)."""
        self._stdout.flush()
        pending_frames.expire(future)

    def _on_chunk(self, chunk: bytes, at: float | None) -> None:
        """Bytes from the REPL's stdout, on the loop; `at`: the time.monotonic() they were
        read (by the reader thread, worker/gathered.py), None: now."""
        self.stdout_bytes += len(chunk)
        if self.poisoned is not None:
            return  # drain until EOF; nothing more is believed
        try:
            for frame in self._decoder.feed(chunk):
                self._on_frame(repl.decode(frame), at)
        except FramingError as exc:
            self.poison(f"unparseable output: {exc}", cause="garbage")
        except Exception as exc:  # pragma: no cover - defensive
            log.exception("worker %s: stdout reader failed", self.name)
            self.poison(f"reader failed: {exc}", cause="garbage")

    def _on_stdout_closed(self) -> None:
        self._closed = asyncio.ensure_future(self._on_eof())

    def _on_frame(self, response: repl.Response, at: float | None) -> None:
        verdict = pending_frames.take(self._pending, response, _loop_time, at)
        if verdict is not None:
            self.poison(verdict[0], cause=verdict[1])

    async def _on_eof(self) -> None:
        # Finish only after both stdout EOF and the exit status (uvloop's
        # order), so the error names the signal and carries the whole tail.
        description = await self._process.exit_description()
        await self._process.stderr_done()
        if self._audit is not None:
            self._audit.close()
        self.eof.set()
        pending = self._pending
        if pending is not None and not pending.future.done():
            tail = self._process.stderr_tail()
            if self.poisoned is not None:
                error: WorkerError = WorkerPoisoned(
                    f"worker {self.name} poisoned: {self.poisoned}{description}", stderr_tail=tail
                )
            elif self._process.out_of_memory_words():
                error = WorkerOutOfMemory(
                    f"worker {self.name} ran out of memory{description}", stderr_tail=tail
                )
            else:
                error = WorkerCrashed(f"worker {self.name} died{description}", stderr_tail=tail)
            pending.future.set_exception(error)

    async def wait_reader(self) -> None:
        if self._stdout.task is not None:
            await asyncio.shield(self._stdout.task)
        if self._closed is not None:
            await asyncio.shield(self._closed)


def _loop_time() -> float:
    return asyncio.get_running_loop().time()
