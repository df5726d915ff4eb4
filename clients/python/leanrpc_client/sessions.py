"""Session calls of the asyncio client (docs/REUSE.md): open a session on a
header, run commands on its envs, close it.

Owns: `SessionCalls`, mixed into `AsyncClient` (aio) as `ProverCalls` is;
the blocking `Client` (sync) forwards to them. Each `SessionResult` carries
`env`, the handle of the env a command made, to continue from with
`run_in_session(..., env=...)`. May import: _proto, _convert, _types.
"""

from __future__ import annotations

from ._convert import _options, keywords_checked, session_result_from_pb
from ._proto import pb
from ._types import SessionResult

__all__ = ["SessionCalls"]


class SessionCalls:
    """OpenSession, RunInSession, CloseSession on an AsyncClient's channel."""

    @keywords_checked
    async def open_session(
        self,
        code: str,
        *,
        name: str = "",
        timeout_s: float = 0.0,
        infotree: str | None = None,
        deadline_s: float | None = None,
        profile: str = "",
        check_axioms: bool | None = None,
    ) -> SessionResult:
        """Opens a session from a header (+ shared preamble); its state is env 0.
        `profile` names the server's REPL profile (toolchain) the session runs
        on for life ("" = the server's default)."""
        request = pb.OpenSessionRequest(
            name=name,
            code=code,
            options=_options(timeout_s, infotree, True, check_axioms, profile=profile),
        )
        return session_result_from_pb(await self._call(self._stub.OpenSession, request, deadline_s))

    @keywords_checked
    async def run_in_session(
        self,
        session: str,
        code: str,
        *,
        env: int | None = None,
        timeout_s: float = 0.0,
        infotree: str | None = None,
        deadline_s: float | None = None,
        profile: str = "",
        check_axioms: bool | None = None,
    ) -> SessionResult:
        """Runs commands (no imports) on session env `env` (default 0). A
        `profile` other than "" must be the session's own (else INVALID_ARGUMENT)."""
        request = pb.RunInSessionRequest(
            session=session,
            code=code,
            options=_options(timeout_s, infotree, True, check_axioms, profile=profile),
        )
        if env is not None:
            request.env = env
        return session_result_from_pb(
            await self._call(self._stub.RunInSession, request, deadline_s)
        )

    async def close_session(self, session: str) -> bool:
        response = await self._call(
            self._stub.CloseSession, pb.CloseSessionRequest(session=session), 30.0
        )
        return response.closed
