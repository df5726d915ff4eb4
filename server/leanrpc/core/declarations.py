"""The declaration scan behind check_axioms, as the services import it.

Owns nothing of its own: it chooses the build of core/declaring.py (the scan
and the axiom plan; its docstring says what is found and how each kind is
checked) that runs. setup.py compiles that same file with Cython, unchanged
(pure-Python mode), as `leanrpc.core.declaring_c`: the plan runs on every
body with check_axioms on (the default), and was the largest share of a
snippet's server CPU (issue 38 item 6). LEANRPC_NO_EXTENSIONS selects the
interpreted module (core._impl). tests/native/test_native_axiom_scan.py holds
the two to the same declarations and plans on the real proofs and on fuzzed
soups. `mask` (core.masking) is re-exported for the readers of both.
May import: core._impl, core.masking, core.declaring, core.declaring_c (the
same source, compiled).
"""

from __future__ import annotations

from ._impl import extensions_disabled
from .masking import mask

if extensions_disabled():
    from . import declaring as _build

    IMPLEMENTATION = "python"
else:
    from . import declaring_c as _build  # type: ignore[attr-defined]

    IMPLEMENTATION = "compiled"

__all__ = [
    "IMPLEMENTATION",
    "PROOF_KINDS",
    "TYPE_KINDS",
    "AxiomCheck",
    "Declaration",
    "declarations",
    "mask",
    "plan_axiom_check",
    "print_axioms_command",
]

AxiomCheck = _build.AxiomCheck
Declaration = _build.Declaration
PROOF_KINDS = _build.PROOF_KINDS
TYPE_KINDS = _build.TYPE_KINDS
declarations = _build.declarations
plan_axiom_check = _build.plan_axiom_check
print_axioms_command = _build.print_axioms_command
