import pathlib

import pytest

from formalize_support import SMALL_NAMES
from leanrpc.formalize.config import FormalizeConfig
from leanrpc.formalize.retrieval import MathlibNames
from testkit import shared_path


@pytest.fixture
def small_names() -> MathlibNames:
    return MathlibNames(SMALL_NAMES)


@pytest.fixture
def config() -> FormalizeConfig:
    # No names file: tests pass `small_names` explicitly when they want retrieval.
    # The triviality gate adds verify calls; the tests that want it turn it on.
    return FormalizeConfig(mathlib_names_path=None, triviality_check=False)


@pytest.fixture(scope="session")
def full_names():
    from leanrpc.formalize.retrieval import load_names

    return load_names(str(shared_path("datasets", "mathlib-decl-names", "mathlib_decls.tsv")))


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> pathlib.Path:
    """A tiny hub-layout Qwen3-MoE checkpoint with the real Qwen3 tokenizer (built once per session)."""
    from leanrpc.formalize.tiny import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny-qwen3-moe"))
