"""Who is answering: a real Lean REPL or the stand-in."""

from __future__ import annotations

from ..config import ReplConfig
from ..repl.probes import soundness_warning
from ..results import LEAN_KIND, STAND_IN_KIND, VerifierIdentity

STAND_IN_MARK = "stand-in"


def identity_from_probe(version_string: str, repl: ReplConfig) -> VerifierIdentity:
    """Builds the identity from `#eval Lean.versionString` and the config.

    The stand-in answers with a version string that names itself, so its
    results can never pass for Lean's.
    """
    is_stand_in = (
        STAND_IN_MARK in version_string or not version_string and _looks_like_stand_in(repl)
    )
    lean_version = repl.lean_version or version_string.split(" ")[0]
    if is_stand_in:
        return VerifierIdentity(
            kind=STAND_IN_KIND,
            lean_version=lean_version,
            repl_revision=repl.repl_revision or "leanrpc-repl-standin",
            project_revision=repl.project_revision,
            description=f"leanrpc REPL stand-in (a test double, not Lean); emulates Lean {lean_version}",
            warning=soundness_warning(lean_version),
        )
    return VerifierIdentity(
        kind=LEAN_KIND,
        lean_version=lean_version,
        repl_revision=repl.repl_revision,
        project_revision=repl.project_revision,
        description=f"Lean {lean_version} REPL {repl.repl_revision or '(revision unknown)'}"
        + (f", project {repl.project_revision}" if repl.project_revision else ""),
        warning=soundness_warning(lean_version),
    )


def _looks_like_stand_in(repl: ReplConfig) -> bool:
    return any("standin" in part or "stand-in" in part for part in repl.command)
