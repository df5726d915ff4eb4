"""Sessions: named env trees whose env ids survive worker restarts.

The pool keeps the commands and replays them (leanrpc.pool.sessions); this
service validates requests and turns pool outcomes into results, exactly as
Verify does.
"""

from __future__ import annotations

import dataclasses
import time

from ..core.headers import split_header
from ..errors import HeaderLoadError, RequestError, WorkerCrashed, WorkerOutOfMemory, WorkerTimeout
from ..pool.pool import Job
from ..pool.sessions import ROOT_ENV, SessionCall
from ..results import Status, VerifyResult

_MAX_NAME = 128


@dataclasses.dataclass
class SessionResult:
    session: str
    env: int | None  # the session env after the code; None if none was made
    result: VerifyResult
    replayed_commands: int = 0


class SessionService:
    def __init__(self, verify) -> None:
        self._verify = verify
        self.pool = verify.pool
        self.registry = verify.pool.sessions

    def _options(self, options):
        # The session is named by the call itself; the option field would be circular.
        return dataclasses.replace(options, session="")

    async def open(self, name: str, code: str, options, *, deadline: float | None = None) -> SessionResult:
        """Creates a session from a header (+ preamble) and runs it: env 0."""
        if len(name) > _MAX_NAME or any(c.isspace() or c == "\x00" for c in name):
            raise RequestError(f"session names are up to {_MAX_NAME} characters without spaces")
        options = self._options(options)
        self._verify.validate(code, options)
        split = split_header(code)
        session = self.registry.create(name, split)
        try:
            out = await self._submit(session, None, split.padded_body, options, deadline, record=True,
                                     result_id=session.name)
        except BaseException:
            self.registry.close(session.name)
            raise
        if out.env is None:
            # No root env: nothing to continue from, so no session.
            self.registry.close(session.name)
        return out

    async def run(self, name: str, code: str, env: int | None, options, *, deadline: float | None = None,
                  record: bool = True, result_id: str = "") -> SessionResult:
        """Runs `code` on session env `env` (default 0); records the new env if `record`."""
        session = self.registry.get(name)
        options = self._options(options)
        self._verify.validate(code, options)
        if split_header(code).imports:
            raise RequestError(
                f"session code cannot import modules; the imports of session {name!r} are fixed when it is opened"
            )
        parent = ROOT_ENV if env is None else env
        self.registry.check_env(session, parent)
        if record:
            self.registry.check_room(session)
        return await self._submit(session, parent, code, options, deadline, record=record,
                                  result_id=result_id or f"{name}:{parent}")

    def close(self, name: str) -> bool:
        return self.registry.close(name)

    def check_exists(self, name: str) -> None:
        self.registry.get(name)

    async def _submit(self, session, parent, text, options, deadline, *, record: bool, result_id: str) -> SessionResult:
        verify = self._verify
        arrived = time.monotonic()
        job = Job(
            split=session.split,
            timeout_s=options.timeout_s or verify.config.pool.default_timeout_s,
            infotree=options.infotree,
            reuse=options.reuse,
            deadline=deadline,
            session=SessionCall(session, parent, text, record),
        )
        try:
            outcome = await self.pool.submit(job)
        except WorkerTimeout as exc:
            return SessionResult(session.name, None, verify._failure(result_id, Status.TIMEOUT, exc, arrived, job))
        except WorkerOutOfMemory as exc:
            return SessionResult(session.name, None, verify._failure(result_id, Status.OUT_OF_MEMORY, exc, arrived, job))
        except WorkerCrashed as exc:
            return SessionResult(session.name, None, verify._failure(result_id, Status.CRASH, exc, arrived, job))
        except HeaderLoadError as exc:
            from .verify import message_from_repl

            result = verify._failure(result_id, Status.REJECTED, exc, arrived, job)
            result.messages = [message_from_repl(m) for m in exc.messages]
            return SessionResult(session.name, None, result)
        from .verify import classify

        result = classify(result_id, outcome, False)
        result.verifier = self.pool.identity
        result.timings.total_s = time.monotonic() - arrived
        return SessionResult(session.name, outcome.session_env, result, outcome.replayed_commands)
