"""The `proof` code policy's scan, as the services import it.

Owns nothing of its own: it chooses the build of policy/reading.py (the
policy's rules; its docstring says what is refused and why) that runs.
setup.py compiles that same file with Cython, unchanged (pure-Python mode),
as `leanrpc.policy.reading_c`, which reads tokens from the compiled lexer
(core.lexer): one source, one set of rules, on every snippet without the
interpreter's per-call overhead. LEANRPC_NO_EXTENSIONS selects the
interpreted module (core._impl). tests/native/test_native_lexing.py holds
the two to the same verdicts.
May import: core._impl, policy.reading, policy.reading_c (the same source, compiled).
"""

from __future__ import annotations

from ..core._impl import extensions_disabled

if extensions_disabled():
    from . import reading as _build

    IMPLEMENTATION = "python"
else:
    from . import reading_c as _build  # type: ignore[attr-defined]

    IMPLEMENTATION = "compiled"

__all__ = ["CANDIDATES", "IMPLEMENTATION", "UNREADABLE", "Scan", "scan"]

Scan = _build.Scan
scan = _build.scan
CANDIDATES = _build.CANDIDATES
UNREADABLE = _build.UNREADABLE
