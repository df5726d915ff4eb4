"""The error tree. Lean-level failures are data in results, never exceptions.

    LeanServiceError
     +-- RequestError            bad input                     -> INVALID_ARGUMENT
     |    +-- NotFoundError       unknown session or state      -> NOT_FOUND
     +-- AuthError               missing/bad credentials       -> UNAUTHENTICATED
     +-- PermissionDenied        a caller names what is not    -> PERMISSION_DENIED
     |                           open to it (a REPL profile)
     +-- OverloadedError         queue or a limit full         -> RESOURCE_EXHAUSTED
     +-- HeaderLoadError         imports did not load          (a REJECTED result;
     |                                                           INVALID_ARGUMENT
     |                                                           if it ends a call)
     +-- ConfigError             unusable config (start-up)    (one line, exit 2;
     |                                                           FAILED_PRECONDITION)
     +-- WorkerError             a REPL failed us              -> UNAVAILABLE
     |    +-- WorkerTimeout                                     -> DEADLINE_EXCEEDED
     |    +-- WorkerCrashed
     |    |    +-- WorkerPoisoned  answer not proven the REPL's (fence, audit)
     |    |    +-- WorkerDiverged  a replay answered otherwise than the first time
     |    +-- WorkerOutOfMemory                                 -> RESOURCE_EXHAUSTED
     |    +-- WorkerBootError
     +-- NotServingError         circuit open, shutting down   -> UNAVAILABLE
     |    +-- ModelNotConfigured  formalize without weights     -> FAILED_PRECONDITION
     +-- InternalError           our bug                       -> INTERNAL
          +-- ProtocolError       REPL output broke the protocol
               +-- FramingError   bytes not cut into frames
                    +-- FrameTooLarge
                    +-- FrameDecodeError

Worker errors raised while a snippet runs become results (TIMEOUT, CRASH,
OUT_OF_MEMORY) in leanrpc.services.outcomes, not status codes; the codes
above apply where an error ends a whole call.

The mapping to gRPC codes lives in one table, leanrpc.edge.errors.

Only bad input is a RequestError: `except RequestError` never catches a
full queue, a missing credential, a refused access, a header that did not
load or a config error, each of which needs its own answer (a retry hint,
UNAUTHENTICATED, PERMISSION_DENIED, a REJECTED result, a start-up line).
"""

from __future__ import annotations


class LeanServiceError(Exception):
    """Root of every error leanrpc raises on purpose."""

    # Attempts the pool made at the job this error answers (set by the pool
    # when it fails a job, so no service reads the job's bookkeeping).
    attempts: int = 0

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        # Extra context for logs and error strings, e.g. a REPL's stderr tail.
        self.detail = detail

    def __str__(self) -> str:
        if self.detail:
            return f"{self.message}\n{self.detail}"
        return self.message


class RequestError(LeanServiceError, ValueError):
    """The caller sent something we cannot accept.

    `field` names the request field at fault when known (e.g. "snippets[2].code"),
    for the BadRequest detail of the gRPC status.
    """

    def __init__(self, message: str, *, detail: str = "", field: str = "") -> None:
        super().__init__(message, detail=detail)
        self.field = field


class OverloadedError(LeanServiceError):
    """The admission queue is full; retry after `retry_after_s`."""

    def __init__(self, message: str, *, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class AuthError(LeanServiceError):
    """Missing or invalid credentials."""


class PermissionDenied(LeanServiceError):
    """The caller is known but may not use what it named (a REPL profile whose
    `clients` leave it out). Not a RequestError: the input is well-formed, and
    `except RequestError` must not turn a refusal of access into bad input."""


class NotFoundError(RequestError):
    """The request names something that does not exist (e.g. a session id)."""


class WorkerError(LeanServiceError):
    """A REPL worker failed while serving a request.

    `batch_index`: in a pipelined batch (Channel.exchange_batch), the command
    during which it failed (how many answers had come); those answers were
    never confirmed by the fence, so none of them is delivered (None for a
    single command)."""

    def __init__(
        self,
        message: str,
        *,
        detail: str = "",
        stderr_tail: str = "",
        batch_index: int | None = None,
    ) -> None:
        super().__init__(message, detail=detail)
        self.stderr_tail = stderr_tail
        self.batch_index = batch_index


class WorkerTimeout(WorkerError):
    """The request ran past its timeout; the worker was killed (`batch_index`:
    in a batch, the command whose time ran out)."""


class WorkerCrashed(WorkerError):
    """The REPL exited, or printed output we could not parse."""


class WorkerPoisoned(WorkerCrashed):
    """The worker's answer could not be proven to be the REPL's answer to the
    command (unsolicited output, a missing fence, a failed /proc audit); the
    worker was killed and the request is safe to re-run on a fresh one."""


class WorkerDiverged(WorkerCrashed):
    """Replaying a chain (session commands, proof tactics) answered otherwise
    than the first time: the process is not a faithful copy. Raised by the
    code that replays; the pool, which alone kills workers, kills it."""


class WorkerOutOfMemory(WorkerError):
    """The worker passed its memory limit and was killed."""


class WorkerBootError(WorkerError):
    """The REPL process could not be started or failed its handshake."""


class NotServingError(LeanServiceError):
    """The service cannot take requests now (circuit open, shutting down)."""


class ModelNotConfigured(NotServingError):
    """Formalize was called but no model weights are configured."""


class InternalError(LeanServiceError):
    """A bug in leanrpc: an invariant did not hold."""


class ProtocolError(InternalError):
    """The REPL's output broke the wire protocol."""


class FramingError(ProtocolError):
    """The REPL's byte stream could not be cut into JSON frames."""


class FrameTooLarge(FramingError):
    """A frame grew past the decoder's max_frame limit."""


class FrameDecodeError(FramingError):
    """A frame was not valid UTF-8 JSON of an object."""


class HeaderLoadError(LeanServiceError):
    """The snippet's import header did not load (unknown module, errors).

    Reported to the caller as a REJECTED result, never as wrong proofs.
    """

    def __init__(self, message: str, *, messages: list | None = None) -> None:
        super().__init__(message)
        self.messages = messages or []


class ConfigError(LeanServiceError, ValueError):
    """A configuration file or value that cannot be used (one line, names the key)."""
