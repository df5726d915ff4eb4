"""Sessions: named env trees whose env ids survive worker restarts.

Owns: session request checks (names, env ids, no imports after opening, the
REPL profile fixed at opening) and running session commands. A session runs
on the profile its OpenSession named (`options.profile`, "" = the default)
for life: every command and every replay after a worker restart runs on a
worker of that profile; a later call naming another profile is refused. The
pool keeps the commands and replays them (leanrpc.pool.sessions); results are built by services.outcomes, exactly as
for Verify, and check_axioms (on unless the request turns it off) runs as
for Verify, through services.axioms: `#print axioms` on the command's own
env, which the session does not keep. Every call names its caller
(`client_id`, edge/identity.py): a session is its opener's, and anyone else
gets NOT_FOUND as for a name never opened; the per-client and server-wide limits (sessions,
bytes held for their code) are the registry's. Every call comes resolved
(services.resolve: validated, split, timeout and code policy applied once at
the door). May import: errors, results, pool, services.outcomes,
services.axioms, services.resolve.
Never imports services.verify (Verify uses this room, not the reverse).
"""

from __future__ import annotations

import dataclasses

from ..config import Config
from ..errors import RequestError
from ..pool import ROOT_ENV, PoolPort, SessionCall, SessionJob, held_cost
from ..results import VerifyResult
from . import axioms
from .outcomes import run_job
from .resolve import Resolved

_MAX_NAME = 128


@dataclasses.dataclass
class SessionResult:
    session: str
    env: int | None  # the session env after the code; None if none was made
    result: VerifyResult
    replayed_commands: int = 0
    profile: str = ""  # the REPL profile the session runs on ("" = default)


class SessionService:
    def __init__(self, pool: PoolPort, config: Config, policy=None) -> None:
        self.pool = pool
        self.config = config
        self.registry = pool.sessions
        self._policy = policy

    @staticmethod
    def options_of(options):
        """A session call's options: the session is named by the call itself
        (the option field would be circular)."""
        return dataclasses.replace(options, session="")

    def check_name(self, name: str) -> None:
        if len(name) > _MAX_NAME or any(c.isspace() or c == "\x00" for c in name):
            raise RequestError(f"session names are up to {_MAX_NAME} characters without spaces")

    def check_owned(self, name: str, client_id: str, profile: str) -> None:
        """NotFoundError unless `client_id` opened session `name`; RequestError
        when `profile` names another profile than the session's."""
        self.check_profile(self.registry.get(name, client_id), profile)

    async def open(self, name: str, request: Resolved) -> SessionResult:
        """Creates a session from a header (+ preamble) and runs it: env 0.
        `request` is the opening code resolved (services.resolve) with
        `options_of` and `command="the session's code"`."""
        self.check_name(name)
        refused = request.answer()
        if refused is not None:  # answered without running (the code policy): no session
            return SessionResult(name, None, refused, profile=request.profile)
        split = request.split
        size = held_cost(request.code)  # what the server holds for it, not its length
        client_id = request.client_id
        session = self.registry.create(
            name,
            split,
            request.profile,
            owner=client_id,
            opening_bytes=size,
            header_bytes=max(0, size - held_cost(split.body)),
        )
        try:
            out = await self._submit(
                session, None, split.padded_body, request, record=True, result_id=session.name
            )
        except BaseException:
            self.registry.close(session.name, client_id)
            raise
        if out.env is None:
            # No root env: nothing to continue from, so no session.
            self.registry.close(session.name, client_id)
        return out

    async def run(
        self, name: str, request: Resolved, env: int | None, *, record: bool = True
    ) -> SessionResult:
        """Runs the resolved `request` on session env `env` (default 0) of its
        client's session `name`; records the new env if `record`."""
        session = self.registry.get(name, request.client_id)
        self.check_profile(session, request.profile)
        if request.split.imports:
            raise RequestError(
                f"session code cannot import modules; the imports of session {name!r} are fixed when it is opened"
            )
        parent = ROOT_ENV if env is None else env
        self.registry.check_env(session, parent)
        refused = request.answer()
        if refused is not None:  # answered without running (the code policy): no new env
            return SessionResult(session.name, None, refused, profile=session.profile)
        size = held_cost(request.code) if record else 0
        if record:
            self.registry.check_room(session, size)
        self.registry.reserve(session.owner, size)
        try:
            return await self._submit(
                session,
                parent,
                request.code,
                request,
                record=record,
                result_id=request.snippet_id or f"{name}:{parent}",
            )
        finally:
            self.registry.unreserve(session.owner, size)

    @staticmethod
    def check_profile(session, profile: str) -> None:
        """RequestError unless `profile` is empty (the session's own) or the
        profile the session was opened on."""
        if profile and profile != session.profile:
            runs_on = f"profile {session.profile!r}" if session.profile else "the default profile"
            raise RequestError(
                f"session {session.name!r} runs on {runs_on}, not on profile {profile!r}; "
                "a session keeps the profile it was opened on",
                field="options.profile",
            )

    def close(self, name: str, *, client_id: str = "") -> bool:
        """Closes `client_id`'s session `name`; False (as for a name never
        opened) when it has none of that name."""
        return self.registry.close(name, client_id)

    async def _submit(
        self, session, parent, text, request: Resolved, *, record: bool, result_id: str
    ) -> SessionResult:
        check = axioms.plan(text) if request.check_axioms else None
        if check is not None:
            text = check.body
        job = SessionJob(
            split=session.split,
            timeout_s=request.timeout_s,
            infotree=request.options.infotree,
            all_tactics=request.options.all_tactics,
            root_goals=request.options.root_goals,
            declarations=request.options.declarations,
            reuse=request.options.reuse,
            deadline=request.deadline,
            session=SessionCall(session, parent, text, record),
            after_body=None if check is None else check.print_command,
            client_id=request.client_id,
            stream_id=request.stream_id or f"session:{session.name}",
            profile=session.profile,
            retire_worker=request.retire_worker,
        )
        result, outcome = await run_job(self.pool, job, result_id)
        if check is not None:
            axioms.finish(result, outcome, check, self.config)
        # The levels Verify reports (Result.checks), for the same checks.
        result.policy = request.policy
        result.axioms_checked = result.axioms_checked or request.check_axioms
        if outcome is None:
            return SessionResult(session.name, None, result, profile=session.profile)
        return SessionResult(
            session.name, outcome.session_env, result, outcome.replayed_commands, session.profile
        )
