"""What a cached verdict is keyed on, and which verdicts may be cached.

Owns the cache key and the cacheability rule; imports only the result types
and the header split (no pool, no services, no I/O).

A verdict may be reused only under a key that holds everything that decides
it (shared/peers/KIMINA.md, "safe reuse keys"):

* the verifier identity (kind, Lean version, REPL revision, project revision)
  and the settings around it that can change an answer (sandbox, REPL
  incrementality / Elab.async, the rules that classify a response);
* the header exactly as the REPL receives it (`HeaderSplit.imports`: comments
  and surrounding blanks removed, which is the normalisation) and the
  preamble (`open`/`set_option`, at their original positions);
* the exact body, and the line it starts on (positions in the answer are
  positions in the user's text);
* every option that changes the answer (infotree mode, check_axioms, the REPL
  command options allTactics / rootGoals / declarations).

The timeout is not in the key: a stored verdict whose body took longer than
the caller's timeout is not served (the caller would have got TIMEOUT), so it
is a miss for that caller.
"""

from __future__ import annotations

import dataclasses
import hashlib

import msgspec

from ..core.headers import HeaderSplit
from ..results import Status, VerifierIdentity

# Bump when the way a REPL response becomes a verdict changes
# (services/verify.py classify, axiom rules) or the entry format changes:
# old entries then simply stop matching.
KEY_VERSION = "leanrpc-result-cache/2"  # 2: the infotree is stored decoded

# Deterministic outcomes only. REJECTED is cacheable only for a header that
# does not load or a verdict rule (axioms); see `is_cacheable`.
CACHEABLE_STATUSES = frozenset({Status.VALID, Status.INVALID, Status.SORRY, Status.REJECTED})
NEVER_CACHED_STATUSES = frozenset(
    {Status.TIMEOUT, Status.CRASH, Status.OUT_OF_MEMORY, Status.CANCELLED}
)

# REJECTED is deterministic only for these causes (services/verify.py): a
# header that does not load, and the axiom rules of check_axioms. Any other
# REJECTED (a request-level REPL error, overload, shutdown) is never cached.
_DETERMINISTIC_REJECTIONS = ("header failed to load", "proof uses ")


@dataclasses.dataclass(frozen=True, slots=True)
class VerifierSettings:
    """The part of the key that is fixed per server: who answers, and how."""

    identity: VerifierIdentity
    # Sandbox description and anything else configured that can change what
    # Lean prints (e.g. `#eval` reading files); free text, hashed as given.
    environment: tuple[str, ...] = ()

    @property
    def fully_identified(self) -> bool:
        """True when the identity pins the toolchain and the project.

        A real Lean REPL without a REPL or project revision could be any
        Mathlib: such a server keeps results in memory only (its own process)
        and never shares or persists them.
        """
        identity = self.identity
        if identity.kind != "lean":
            return True
        return bool(identity.lean_version and identity.repl_revision and identity.project_revision)


def cache_key(
    settings: VerifierSettings,
    split: HeaderSplit,
    *,
    infotree: str | None,
    check_axioms: bool | str,
    command_options: str = "",
) -> str:
    """Hex SHA-256 over every input that decides the verdict. `check_axioms`
    may be the allow-list in force (text), so that changing it changes the key.
    `command_options` names the REPL command options asked for (issue 41:
    `allTactics`, `rootGoals`, `declarations`): an exact match, so a result
    with tactics is never served to a request without them, nor the other way
    round. Only appended when some are asked, so the keys of requests without
    any stay what they were (a warm cache stays warm)."""
    extra = [command_options] if command_options else []
    material = msgspec.msgpack.encode(
        [
            KEY_VERSION,
            settings.identity.cache_key,
            list(settings.environment),
            split.imports,
            split.preamble,
            split.body_start_line,
            split.body,
            infotree or "",
            check_axioms if isinstance(check_axioms, str) else bool(check_axioms),
            *extra,
        ]
    )
    return hashlib.sha256(material).hexdigest()


def is_cacheable(status: Status, error: str = "") -> bool:
    """Whether a verdict with this status (and error text) may be stored."""
    if status not in CACHEABLE_STATUSES:
        return False
    if status is Status.REJECTED:
        return error.startswith(_DETERMINISTIC_REJECTIONS)
    return True
