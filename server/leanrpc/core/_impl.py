"""Which implementation the core facades load.

The compiled modules in leanrpc._native are required. The pure-Python twins
(leanrpc.core.*_py) replace them only when LEANRPC_NO_EXTENSIONS is set to a
value other than "" or "0"; a missing or broken extension otherwise raises
ImportError at import time instead of silently running slower.
"""

import os

ENV_VAR = "LEANRPC_NO_EXTENSIONS"


def extensions_disabled() -> bool:
    return os.environ.get(ENV_VAR, "") not in ("", "0")
