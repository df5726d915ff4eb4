"""The compiled core is what the service runs, unless explicitly disabled."""

import os
import subprocess
import sys

import leanrpc.core
from leanrpc.core._impl import ENV_VAR, extensions_disabled


def test_native_loaded():
    if extensions_disabled():
        assert not leanrpc.core.NATIVE_ACTIVE
        return
    assert leanrpc.core.NATIVE_ACTIVE, (
        "leanrpc._native is not active: build it (pip install -e .) or set LEANRPC_NO_EXTENSIONS=1 on purpose"
    )
    for facade in (leanrpc.core.framing, leanrpc.core.headers, leanrpc.core.trie):
        assert facade.IMPLEMENTATION == "native"
    assert leanrpc.core.framing.FrameDecoder.__module__ == "leanrpc._native.framing"
    assert leanrpc.core.trie.PrefixTrie.__module__ == "leanrpc._native.trie"
    assert leanrpc.core.headers.split_header.__module__ == "leanrpc._native.headers"


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    environ = {key: value for key, value in os.environ.items() if key != ENV_VAR}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=60
    )


def test_fallback_only_when_asked():
    code = (
        "import leanrpc.core as c\n"
        "print(c.NATIVE_ACTIVE, c.framing.IMPLEMENTATION, c.headers.IMPLEMENTATION, c.trie.IMPLEMENTATION)\n"
    )
    assert _run(code, **{ENV_VAR: "1"}).stdout.split() == ["False", "python", "python", "python"]
    assert _run(code).stdout.split() == ["True", "native", "native", "native"]
    assert _run(code, **{ENV_VAR: "0"}).stdout.split() == ["True", "native", "native", "native"]


def test_missing_extension_is_an_import_error_not_a_silent_fallback():
    code = "import sys\nsys.modules['leanrpc._native.trie'] = None\nimport leanrpc.core\n"
    result = _run(code)
    assert result.returncode != 0
    assert "ImportError" in result.stderr or "ModuleNotFoundError" in result.stderr


def test_core_imports_no_asyncio_grpc_or_logging():
    code = (
        "import sys\nimport leanrpc.core, leanrpc.core.framing_py, leanrpc.core.headers_py, leanrpc.core.trie_py\n"
        "print(sorted(m for m in ('asyncio', 'grpc', 'logging') if m in sys.modules))\n"
    )
    for env in ({}, {ENV_VAR: "1"}):
        result = _run(code, **env)
        assert result.stdout.strip() == "[]", result.stderr


def test_the_lexer_and_the_policy_fall_back_only_when_asked():
    code = (
        "import importlib\n"
        "names = ('leanrpc.core.lexer', 'leanrpc.core.lexchars', 'leanrpc.policy.scan')\n"
        "print(*(importlib.import_module(n).IMPLEMENTATION for n in names))\n"
    )
    assert _run(code, **{ENV_VAR: "1"}).stdout.split() == ["python", "python", "python"]
    assert _run(code).stdout.split() == ["compiled", "native", "compiled"]
