"""Comments and literals blanked out, as every reader of masked Lean text imports it.

Owns nothing of its own: it chooses the build of core/blanking.py (the
masking itself; its docstring says what is blanked and how) that runs.
setup.py compiles that same file with Cython, unchanged (pure-Python mode),
as `leanrpc.core.blanking_c`: the axiom plan masks every body, and the
interpreter's per-call overhead in its loops was a share of each snippet's
CPU (issue 38 item 6). LEANRPC_NO_EXTENSIONS selects the interpreted module
(core._impl). tests/native/test_native_axiom_scan.py holds the two to the
same masks on the real proofs and on fuzzed soups.
May import: core._impl, core.blanking, core.blanking_c (the same source, compiled).
"""

from __future__ import annotations

from ._impl import extensions_disabled

if extensions_disabled():
    from . import blanking as _build

    IMPLEMENTATION = "python"
else:
    from . import blanking_c as _build  # type: ignore[attr-defined]

    IMPLEMENTATION = "compiled"

__all__ = ["IDENT_CHAR", "IMPLEMENTATION", "mask"]

IDENT_CHAR = _build.IDENT_CHAR
mask = _build.mask
