"""The cache key: a verdict is never reused across a different identity,
environment, header, body, position or option; only deterministic statuses
are cacheable."""

from __future__ import annotations

import dataclasses

import pytest

from leanrpc.cache import (
    CACHEABLE_STATUSES,
    NEVER_CACHED_STATUSES,
    VerifierSettings,
    cache_key,
    is_cacheable,
)
from leanrpc.core.headers import split_header
from leanrpc.results import Status, VerifierIdentity

LEAN = VerifierIdentity(
    kind="lean", lean_version="v4.19.0", repl_revision="r1", project_revision="p1"
)
BASE = VerifierSettings(LEAN, ("sandbox=a",))
CODE = "import Mathlib\nopen Nat\n\ntheorem t (x : Nat) : x + 0 = x := by\n  simp\n"


def key(settings=BASE, code=CODE, infotree=None, check_axioms=False):
    return cache_key(settings, split_header(code), infotree=infotree, check_axioms=check_axioms)


@pytest.mark.parametrize("field", ["kind", "lean_version", "repl_revision", "project_revision"])
def test_every_identity_field_is_in_the_key(field):
    other = dataclasses.replace(LEAN, **{field: "other"})
    assert key(VerifierSettings(other, BASE.environment)) != key()


def test_environment_is_in_the_key():
    assert key(VerifierSettings(LEAN, ("sandbox=b",))) != key()
    assert key(VerifierSettings(LEAN, ())) != key()


def test_each_profile_keys_on_its_own_repl_settings():
    from leanrpc.cache.build import key_environments
    from leanrpc.config import Config

    config = Config.from_dict(
        {
            "repl": {
                "incrementality": "off",
                "fork": {"command": ["repl"], "incrementality": "on", "elab_async": "on"},
            }
        }
    )
    environments = key_environments(config, "unshare")
    assert set(environments) == {"", "fork"}
    assert "incrementality=off" in environments[""] and "incrementality=on" in environments["fork"]
    assert "elab_async=on" in environments["fork"] and "elab_async=on" not in environments[""]
    assert all("sandbox=unshare" in env for env in environments.values())
    keys = {key(VerifierSettings(LEAN, env)) for env in environments.values()}
    assert len(keys) == 2


@pytest.mark.parametrize(
    "variant",
    [
        CODE.replace("import Mathlib", "import Mathlib.Tactic"),  # header
        CODE.replace("import Mathlib", "import Mathlib\nimport Aesop"),  # one more import
        CODE.replace("open Nat", "open Real"),  # preamble
        CODE.replace("simp", "simp only []"),  # body
        CODE.replace("simp\n", "simp\n\n"),  # trailing text of the body
        CODE.replace("\n\ntheorem", "\n\n\ntheorem"),  # body moves a line: positions change
        CODE.replace("open Nat", "open  Nat"),  # preamble columns change
    ],
)
def test_any_change_of_header_or_body_changes_the_key(variant):
    assert variant != CODE
    assert key(code=variant) != key()


def test_options_that_change_the_answer_are_in_the_key():
    keys = {key(), key(infotree="original"), key(infotree="full"), key(check_axioms=True)}
    assert len(keys) == 4


def test_header_comments_do_not_change_the_key():
    # What the REPL receives is the same: the normalised header.
    commented = CODE.replace("import Mathlib\n", "import Mathlib -- the library\n")
    assert split_header(commented).imports == split_header(CODE).imports
    assert key(code=commented) == key()


def test_same_inputs_same_key():
    assert key() == key(
        VerifierSettings(dataclasses.replace(LEAN, description="other words"), ("sandbox=a",))
    )


def test_only_deterministic_statuses_are_cacheable():
    assert CACHEABLE_STATUSES | NEVER_CACHED_STATUSES == set(Status)
    for status in (Status.VALID, Status.INVALID, Status.SORRY):
        assert is_cacheable(status)
    for status in NEVER_CACHED_STATUSES:
        assert not is_cacheable(status, "header failed to load")
    assert is_cacheable(Status.REJECTED, "header failed to load: unknown module Foo")
    assert is_cacheable(
        Status.REJECTED, "proof uses native_decide / compiler trust (Lean.ofReduceBool)"
    )
    assert not is_cacheable(Status.REJECTED, "REPL error: Unknown environment.")
    assert not is_cacheable(Status.REJECTED, "RESOURCE_EXHAUSTED: queue full; retry after 1000 ms")


def test_an_unpinned_lean_identity_is_not_shared():
    assert not VerifierSettings(dataclasses.replace(LEAN, project_revision="")).fully_identified
    assert VerifierSettings(LEAN).fully_identified
    assert VerifierSettings(VerifierIdentity(kind="stand-in")).fully_identified
