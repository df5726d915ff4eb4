"""The header-hash rule (x-leanrpc-header-hash) against its one test-vector file.

The rule is defined in proto/leanrpc/v1/verifier.proto; the vectors in
proto/leanrpc/v1/header_hash_vectors.json are read here (Python client and
the server's split_header) and by tests/ecosystem/test_node_client.py (Node).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from leanrpc.client import header_hash
from leanrpc.core import headers_py

VECTORS_PATH = (
    Path(__file__).resolve().parents[2] / "proto" / "leanrpc" / "v1" / "header_hash_vectors.json"
)
VECTORS = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))["vectors"]


def _splitters():
    out = [headers_py.split_header]
    try:
        from leanrpc._native import headers as native
    except ImportError:
        return out
    return [*out, native.split_header]


def test_the_vectors_cover_the_rule():
    names = {v["name"] for v in VECTORS}
    assert len(names) == len(VECTORS) >= 10
    assert any(not v["lean_imports"] for v in VECTORS), "a snippet without a header"
    assert any(not v["hash_covers_lean_header"] for v in VECTORS), (
        "a case where the line rule and Lean differ"
    )
    assert len({v["header_hash"] for v in VECTORS}) >= 6, "the vectors tell headers apart"


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["name"])
def test_python_client_header_hash(vector):
    assert header_hash(vector["code"]) == vector["header_hash"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["name"])
def test_split_header_finds_the_header_the_hash_stands_for(vector):
    for split_header in _splitters():
        imports = split_header(vector["code"]).imports
        assert (imports.split("\n") if imports else []) == vector["lean_imports"], (
            split_header.__module__
        )
    # Where the flag is set, the routing hash is exactly the rule over the
    # header the pool loads, so one routing key is one warm header.
    over_lean = hashlib.sha256("\n".join(vector["lean_imports"]).encode()).hexdigest()[:16]
    assert (over_lean == vector["header_hash"]) is vector["hash_covers_lean_header"]
