"""The code policy (issue 25 item 1, issue 43): what a snippet may contain
before any REPL sees it. Text in, verdict out: `scan` (leanrpc.policy.scan)
over Lean's tokenizer (leanrpc.core.lexer), with its lists in
leanrpc.policy.lists. May import: core (the lexer, _impl) and _native.policy
(the needle search's compiled twin), nothing above.
"""

from .lists import ALLOWED_ATTRIBUTES, ALLOWED_HASH, ALLOWED_OPTIONS, REFUSED_COMMANDS
from .scan import Scan, scan

PROOF = "proof"
TRUSTED = "trusted"
POLICIES = (PROOF, TRUSTED)

__all__ = [
    "ALLOWED_ATTRIBUTES",
    "ALLOWED_HASH",
    "ALLOWED_OPTIONS",
    "POLICIES",
    "PROOF",
    "REFUSED_COMMANDS",
    "Scan",
    "TRUSTED",
    "scan",
]
