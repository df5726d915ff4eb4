"""Every test in tests/native runs on both implementations.

The `framing`, `headers` and `trie` fixtures are parametrized over "python"
(leanrpc.core.X_py) and "native" (leanrpc._native.X), imported directly, so
the facade's choice (LEANRPC_NO_EXTENSIONS) does not matter here.
"""

import pytest

from native_support import IMPLEMENTATIONS, module


@pytest.fixture(params=IMPLEMENTATIONS)
def framing(request):
    return module(request.param, "framing")


@pytest.fixture(params=IMPLEMENTATIONS)
def headers(request):
    return module(request.param, "headers")


@pytest.fixture(params=IMPLEMENTATIONS)
def trie(request):
    return module(request.param, "trie")
