"""Which code policy a request runs under, and what `proof` answers without a REPL.

Owns: `CodePolicy.of(profile, client_id)`, the policy in force: `trusted`
only where the server's config says so (`[policy] default`, a trusted REPL
profile, a trusted client identity), never from the request alone; and
`CodePolicy.screen`, the answer to a snippet that must not reach a REPL:
- a refused construct (leanrpc.policy.scan) is REJECTED, naming it with its
  line and column;
- native evaluation (`native_decide`, `Lean.ofReduceBool`, …) would run the
  snippet's own compiled code inside the REPL, so under `proof` it is never
  sent: with the axiom check on and the native-evaluation axioms outside the
  allow-list (the default), it is answered exactly as the axiom check would
  answer it (the proof would depend on `Lean.ofReduceBool`); with the
  check off, REJECTED, since nothing short of running it tells.
May import: leanrpc.policy, leanrpc.results, leanrpc.config, leanrpc.errors.
"""

from __future__ import annotations

from ..config import Config
from ..errors import RequestError
from ..policy import PROOF, TRUSTED, Scan, scan
from ..results import Status, VerifyResult

__all__ = ["CodePolicy", "PolicyRefused", "PROOF", "TRUSTED"]

# The axiom a native evaluation leaves in the proof, by the names Lean has used.
NATIVE_AXIOMS = ("Lean.ofReduceBool", "Lean.trustCompiler")
# What the axiom check answers a proof that depends on them (repl/outcome.py).
NATIVE_STATUS = Status.REJECTED


class PolicyRefused(RequestError):
    """A single command (a session command, a tactic) the `proof` policy refuses."""


class CodePolicy:
    def __init__(self, config: Config, allowed_axioms: frozenset[str]) -> None:
        section = config.policy
        self.default = section.default
        self.trusted_clients = frozenset(section.trusted_clients)
        self.trusted_profiles = frozenset(section.trusted_profiles)
        self.native_allowed = any(axiom in allowed_axioms for axiom in NATIVE_AXIOMS)
        self.stats = {"scanned": 0, "refused": 0, "native": 0}

    def of(self, profile: str = "", client_id: str = "") -> str:
        if (
            self.default == TRUSTED
            or profile in self.trusted_profiles
            or (client_id and client_id in self.trusted_clients)
        ):
            return TRUSTED
        return PROOF

    def scan(self, text: str) -> Scan:
        self.stats["scanned"] += 1
        return scan(text)

    def screen(
        self, snippet_id: str, code: str, policy: str, *, check_axioms: bool
    ) -> VerifyResult | None:
        """The answer to a snippet that must not reach a REPL, or None to run it."""
        if policy != PROOF:
            return None
        found = self.scan(code)
        if found.refused:
            self.stats["refused"] += 1
            return VerifyResult(
                id=snippet_id, status=Status.REJECTED, error=found.message, policy=policy
            )
        if not found.native:
            return None
        self.stats["native"] += 1
        if check_axioms and not self.native_allowed:
            return self._native_answer(snippet_id, found, policy)
        where = f"{found.native} at line {found.native_line}"
        return VerifyResult(
            id=snippet_id,
            status=Status.REJECTED,
            policy=policy,
            error=(
                f"refused by the code policy `proof`: native evaluation ({where}) runs the snippet's own "
                "compiled code inside the REPL; with check_axioms on it is answered INVALID "
                "(Lean.ofReduceBool is outside the allow-list), or run it under the `trusted` policy"
            ),
        )

    @staticmethod
    def _native_answer(snippet_id: str, found: Scan, policy: str) -> VerifyResult:
        """What the axiom check would answer native evaluation, without running it."""
        where = f"{found.native} at line {found.native_line}"
        return VerifyResult(
            id=snippet_id,
            status=NATIVE_STATUS,
            policy=policy,
            axioms=["Lean.ofReduceBool"],
            axioms_checked=True,
            error=(
                f"proof uses native_decide / compiler trust (Lean.ofReduceBool; {where}); answered "
                "without running it, since native evaluation runs the snippet's own compiled code "
                "inside the REPL"
            ),
        )

    def check_command(
        self,
        text: str,
        what: str,
        policy: str = PROOF,
        *,
        check_axioms: bool = False,
        snippet_id: str = "",
    ) -> VerifyResult | None:
        """PolicyRefused (INVALID_ARGUMENT) for a session command or tactic `proof` refuses.
        Native evaluation with the axiom check on (and its axioms outside the
        allow-list) is answered as Verify answers it, by the axiom rule without
        running it (issue 41 item 10): that answer is returned, else None."""
        if policy != PROOF:
            return None
        found = self.scan(text)
        if found.refused:
            self.stats["refused"] += 1
            raise PolicyRefused(f"{what}: {found.message}")
        if found.native and check_axioms and not self.native_allowed:
            self.stats["native"] += 1
            return self._native_answer(snippet_id, found, policy)
        if found.native:
            self.stats["native"] += 1
            raise PolicyRefused(
                f"{what}: refused by the code policy `proof`: native evaluation ({found.native} at "
                f"line {found.native_line}) runs the snippet's own compiled code inside the REPL"
            )
        return None
