"""One resolved request: what every door turns its input into, once.

Owns: `Resolved`, the typed, immutable request every door (gRPC Verify and
VerifyStream, Extract, sessions, the REST gateway; the Prover's whole-proof
check) builds with `Resolver.resolve` before anything runs, and the rules it
applies while building it, each in this one place:

* input validation (empty code, size, NUL, timeout range, infotree mode,
  a known profile the caller may name, a parseable reference, the session's
  owner and profile);
* the header split (`split_header` runs here and nowhere else for a request,
  through core.header_memo: a snippet that starts with the characters that
  decided an earlier split, as a GRPO group's completions do, reuses it);
* the timeout (0 = `[pool] default_timeout_s`, resolved only here) and the
  absolute deadline of the call;
* the code policy in force and its verdict (a snippet `proof` keeps from the
  REPL is answered by `refused`; a session command it refuses raises);
* check_axioms (None = `[axioms] check`), the parsed reference;
* the result-cache key (given by the cache through the `keys` port; None when
  the request bypasses the cache).

The Prover's requests are resolved here too (issue 42 item 2): `Resolver.start`
and `Resolver.expand` build an immutable `ResolvedStart` / `ResolvedExpand`
(code, policy, timeout, TTL, tactic checks, the caller's own live state)
through the `ProverRules` port (the types are services.requests'), and a
`Caller` (identity, deadline, stream) carries who asks down in one value.

Below the doors nothing re-validates, re-splits or re-resolves: services,
the cache and the pool read these fields. May import: config, core, errors,
reference, results, services.policy, services.access, services.axioms,
services.reference (its parser), services.requests. Never imports pool internals, cache, edge or `*_pb2`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Protocol, Sequence

from ..config import Config
from ..core.header_memo import HeaderMemo
from ..core.headers import HeaderSplit
from ..errors import ConfigError, RequestError
from ..reference import Reference
from ..results import ReferenceCheck, ReferenceReason, Status, VerifyResult
from . import axioms
from .access import ProfileAccess
from .policy import PROOF, CodePolicy
from .requests import Caller, ProverRules, ResolvedExpand, ResolvedStart

__all__ = [
    "INFOTREE_MODES",
    "KeyPort",
    "Resolved",
    "Resolver",
    "VerifyOptions",
    "deadline_in",
    "default_timeout_s",
]

INFOTREE_MODES = ("original", "substantive", "tactics", "full")


@dataclasses.dataclass(frozen=True)
class VerifyOptions:
    """A request's options as the caller sent them (0 / None / "" = the server's choice)."""

    timeout_s: float = 0.0  # 0: server default
    infotree: str | None = None
    reuse: bool = True
    # None: the server default (`[axioms] check`, on unless configured off);
    # False turns the check off for this request only.
    check_axioms: bool | None = None
    session: str = ""
    # Use the result cache (leanrpc.cache wraps the verify service); false bypasses it.
    cache: bool = True
    # The REPL profile (`[repl.<name>]`); "" = the default `[repl]`.
    profile: str = ""
    # The problem's own statement (issue 25 item 2): header plus declarations
    # proved by `sorry`; "" = not pinned. services.reference checks it.
    reference: str = ""
    # REPL command options (issue 41): `allTactics`, `rootGoals` and the
    # fork's `declarations`; each changes what the REPL is asked (and the cache key).
    all_tactics: bool = False
    root_goals: bool = False
    declarations: bool = False

    @property
    def command_options(self) -> str:
        """The command options asked for, as the cache key's text ("" for none)."""
        asked = (("allTactics", self.all_tactics), ("rootGoals", self.root_goals))
        asked += (("declarations", self.declarations),)
        return ",".join(name for name, on in asked if on)


@dataclasses.dataclass(frozen=True, slots=True)
class Resolved:
    """One request, resolved: everything below the door reads it, nothing re-derives it."""

    snippet_id: str
    code: str
    options: VerifyOptions
    split: HeaderSplit
    timeout_s: float  # the default applied
    deadline: float | None  # absolute (time.monotonic()); None: the caller set none
    client_id: str  # who asks (edge/identity.py): fairness, ownership, trusted policy
    stream_id: str  # its stream or batch: fairness only
    profile: str
    policy: str  # the code policy in force: "proof" or "trusted"
    refused: VerifyResult | None  # the policy's answer to a snippet that must not reach a REPL
    check_axioms: bool
    reference: Reference | None
    cache_key: str | None  # None: the request bypasses the result cache
    # `trusted` only because of who asks (`[policy] trusted_clients`) on a
    # profile whose workers also serve `proof` requests: the worker that runs
    # it is retired afterwards, since the caller's code may have left
    # something behind in that REPL process (docs/SECURITY.md, code policy).
    retire_worker: bool = False
    # A worker to run on only when no other idle one can (the Prover's whole-proof
    # check, issue 28: the worker that found the proof has the search's next states).
    avoid_worker: str = ""

    def answer(self) -> VerifyResult | None:
        """A fresh copy of the policy's answer (the result is the caller's to change)."""
        return None if self.refused is None else dataclasses.replace(self.refused)


class KeyPort(Protocol):
    """The cache's part of resolution: the key of a request it may answer, or None."""

    def __call__(
        self,
        profile: str,
        split: HeaderSplit,
        infotree: str | None,
        axiom_rules: bool | str,
        command_options: str = "",
    ) -> str | None: ...


class SessionLookup(Protocol):
    """What resolution asks of the session service (services.sessions)."""

    def check_owned(self, name: str, client_id: str, profile: str) -> None: ...


def deadline_in(remaining_s: float | None) -> float | None:
    """The absolute deadline of a call with `remaining_s` seconds left (None: no deadline)."""
    return None if remaining_s is None else time.monotonic() + remaining_s


def default_timeout_s(config: Config) -> float:
    """The timeout of work no request set one for (0 in a request, a background rebuild)."""
    return config.pool.default_timeout_s


@dataclasses.dataclass(frozen=True)
class Resolver:
    """Builds `Resolved` requests; one per server, shared by every door."""

    config: Config
    policy: CodePolicy
    check_profile: Callable[[str], None]  # ConfigError for a profile the pool has no REPL for
    parse_reference: Callable[[str], Reference]  # RequestError for a reference that pins nothing
    access: ProfileAccess  # PermissionDenied for a profile not open to the caller
    sessions: SessionLookup | None = None
    keys: KeyPort | None = None
    # The last few header splits (core.header_memo), shared with `with_keys`' copy.
    headers: HeaderMemo = dataclasses.field(default_factory=HeaderMemo, compare=False)

    def with_keys(self, keys: KeyPort) -> "Resolver":
        """This resolver, with the result cache's keys (cache.CachedVerifier)."""
        return dataclasses.replace(self, keys=keys)

    def timeout(self, timeout_s: float, *, field: str | None = None) -> float:
        """A request's timeout with the default applied; RequestError when out
        of range (naming `field`, the Prover's Duration field, when given)."""
        limit = self.config.pool.max_timeout_s
        if field is None:  # Verify's float seconds
            if timeout_s < 0 or timeout_s != timeout_s:
                raise RequestError("timeout_s must be a non-negative number")
            if timeout_s > limit:
                raise RequestError(f"timeout_s {timeout_s} is over the limit of {limit}")
        else:
            if timeout_s != timeout_s:
                raise RequestError(f"{field} must be a non-negative duration", field=field)
            if timeout_s < 0:
                raise RequestError(
                    f"{field} is negative ({timeout_s:g} s); leave it unset for the server default",
                    field=field,
                )
            if timeout_s > limit:
                raise RequestError(
                    f"{field} {timeout_s:g} s is over the limit of {limit:g} s (pool.max_timeout_s)",
                    field=field,
                )
        return timeout_s or default_timeout_s(self.config)

    def check_code(self, code: str, what: str = "snippet code") -> None:
        """RequestError for code refused outright (empty, too long, NUL)."""
        if not code.strip():
            raise RequestError(f"{what} is empty")
        limit = self.config.server.max_code_chars
        if len(code) > limit:
            raise RequestError(f"{what} has {len(code)} characters, over the limit of {limit}")
        if "\x00" in code:
            raise RequestError(f"{what} contains a NUL character")

    def start(
        self,
        rules: ProverRules,
        code: str,
        *,
        timeout_s: float = 0.0,
        ttl_s: float = 0.0,
        check_axioms: bool | None = None,
        caller: Caller = Caller(),
    ) -> ResolvedStart:
        """A StartProof, resolved once at its door; RequestError for bad input."""
        self.check_code(code, "code")
        self._check_prover_policy(code, "code")
        timeout = self.timeout(timeout_s, field="timeout")
        limits = rules.limits
        if ttl_s != ttl_s or ttl_s < 0:
            raise RequestError(
                f"ttl is negative ({ttl_s:g} s); leave it unset for the server default", field="ttl"
            )
        if ttl_s > limits.max_ttl_s:
            raise RequestError(
                f"ttl {ttl_s:g} s is out of range: between 0 (unset: the server default "
                f"{limits.default_ttl_s:g} s) and {limits.max_ttl_s:g} s (prover.max_ttl_s)",
                field="ttl",
            )
        split = self.headers.split(code)
        prepared = rules.prepare(code, split.body)
        if prepared != code:  # a bare statement, closed with `:= by sorry`
            code, split = prepared, self.headers.split(prepared)
        return ResolvedStart(code, split, timeout, ttl_s, check_axioms, caller)

    def expand(
        self,
        rules: ProverRules,
        state_id: str,
        tactics: Sequence[str],
        *,
        each: bool = False,
        timeout_s: float = 0.0,
        caller: Caller = Caller(),
        request_id: str = "",
        check_whole: bool = True,
    ) -> ResolvedExpand:
        """A RunTactic or Expand, resolved once at its door. With `each` (Expand's
        `tactics`) a refused tactic is refused alone (its RequestError in
        `refusals`); otherwise it refuses the request. Raises for what concerns
        them all: no tactics or too many, a bad timeout, a state that is not the caller's."""
        limits = rules.limits
        if not tactics:
            raise RequestError("an Expand request needs a tactic or tactics", field="tactics")
        if len(tactics) > limits.max_tactics_per_expand:
            raise RequestError(
                f"{len(tactics)} tactics in one request, over the limit of "
                f"{limits.max_tactics_per_expand} (prover.max_tactics_per_expand)",
                field="tactics",
            )
        refusals: list[RequestError | None] = []
        for tactic in tactics:
            try:
                self._check_tactic(tactic, limits.max_tactic_chars)
            except RequestError as exc:
                if not each:
                    raise
                refusals.append(exc)
            else:
                refusals.append(None)
        timeout = self.timeout(timeout_s, field="timeout")
        state = rules.state(state_id, caller.client_id)  # another client's: NOT_FOUND
        return ResolvedExpand(
            state, tuple(tactics), tuple(refusals), timeout, caller, request_id, check_whole
        )

    def _check_tactic(self, tactic: str, max_chars: int) -> None:
        if not tactic.strip():
            raise RequestError("tactic is empty")
        if len(tactic) > max_chars:
            raise RequestError(
                f"tactic has {len(tactic)} characters, over the limit of {max_chars}"
            )
        if "\x00" in tactic:
            raise RequestError("tactic contains a NUL character")
        self._check_prover_policy(tactic, "tactic")

    def _check_prover_policy(self, text: str, what: str) -> None:
        """The Prover runs under the server's default code policy (`[policy]
        default`): under `proof`, code or a tactic that would run its own code
        is refused (PolicyRefused, INVALID_ARGUMENT) before a REPL sees it."""
        self.policy.check_command(text, what, self.policy.of())

    def resolve(
        self,
        snippet_id: str,
        code: str,
        options: VerifyOptions,
        *,
        client_id: str = "",
        stream_id: str = "",
        deadline: float | None = None,
        command: str = "",
    ) -> Resolved:
        """The resolved request, or RequestError (NotFoundError for another
        client's session) for input the server refuses. `command` names a
        session's code ("the session command"): the code policy then refuses
        it with PolicyRefused instead of answering it."""
        if not code.strip():
            raise RequestError("snippet code is empty")
        limit = self.config.server.max_code_chars
        if len(code) > limit:
            raise RequestError(
                f"snippet code has {len(code)} characters, over the limit of {limit}"
            )
        timeout_s = self.timeout(options.timeout_s)
        if options.infotree is not None and options.infotree not in INFOTREE_MODES:
            raise RequestError(f"unknown infotree mode {options.infotree!r}")
        if "\x00" in code:
            raise RequestError("snippet code contains a NUL character")
        if options.profile:
            try:
                self.check_profile(options.profile)
            except ConfigError as exc:  # unknown: bad input (INVALID_ARGUMENT) naming the field
                raise RequestError(exc.message, field="options.profile") from exc
            self.access.check(options.profile, client_id)
        reference = None
        if options.reference:
            if options.session:
                raise RequestError("a reference cannot be pinned in a session", field="reference")
            reference = self.parse_reference(options.reference)
        if options.session and self.sessions is not None:
            # The session runs on its own profile; naming another one is refused.
            self.sessions.check_owned(options.session, client_id, options.profile)
        policy = self.policy.of(options.profile, client_id)
        check_axioms = axioms.axioms_on(options, self.config)
        refused = None
        if command:
            refused = self.policy.check_command(
                code, command, policy, check_axioms=check_axioms, snippet_id=snippet_id
            )
        else:
            refused = self._screen(snippet_id, code, policy, check_axioms, reference)
        split = self.headers.split(code)
        key = None
        if (
            self.keys is not None
            and refused is None
            and not options.session
            and options.cache
            and reference is None
            and policy == PROOF
        ):
            key = self.keys(
                options.profile,
                split,
                options.infotree,
                self._axiom_rules(check_axioms),
                options.command_options,
            )
        return Resolved(
            snippet_id=snippet_id,
            code=code,
            options=options,
            split=split,
            timeout_s=timeout_s,
            deadline=deadline,
            client_id=client_id,
            stream_id=stream_id,
            profile=options.profile,
            policy=policy,
            refused=refused,
            check_axioms=check_axioms,
            reference=reference,
            cache_key=key,
            retire_worker=policy != PROOF and self.policy.of(options.profile) == PROOF,
        )

    def _screen(
        self,
        snippet_id: str,
        code: str,
        policy: str,
        check_axioms: bool,
        reference: Reference | None,
    ) -> VerifyResult | None:
        """The code policy's answer to a snippet that must not reach a REPL (services.policy), or None."""
        pinned = (
            reference is not None
        )  # a pinned snippet's axioms are checked by the statement check too
        result = self.policy.screen(snippet_id, code, policy, check_axioms=check_axioms or pinned)
        if result is not None and pinned and result.axioms_checked:
            # Native evaluation under a reference: what the statement check would say.
            names = reference.names
            result.status = Status.INVALID
            result.reference = ReferenceCheck(
                passed=False,
                reason=ReferenceReason.FORBIDDEN_AXIOM,
                declaration=names[0] if names else "",
                detail=result.error,
                declarations=names,
            )
        return result

    def _axiom_rules(self, on: bool) -> bool | str:
        """The check_axioms part of the cache key: False, or the allow-list in force."""
        return "allowed:" + ",".join(sorted(self.config.axioms.allowed)) if on else False
