"""The code policy (issue 25 item 1): what a snippet may contain before any
REPL sees it. Text in, verdict out: `scan` (leanrpc.policy.scan) over the
lexer (leanrpc.policy.lexer). May import: core._impl and _native.policy
(the lexer's compiled twin), nothing above.
"""

from .scan import ALLOWED_OPTIONS, REFUSED_ATTRIBUTES, REFUSED_COMMANDS, Scan, scan

PROOF = "proof"
TRUSTED = "trusted"
POLICIES = (PROOF, TRUSTED)

__all__ = [
    "ALLOWED_OPTIONS",
    "POLICIES",
    "PROOF",
    "REFUSED_ATTRIBUTES",
    "REFUSED_COMMANDS",
    "Scan",
    "TRUSTED",
    "scan",
]
