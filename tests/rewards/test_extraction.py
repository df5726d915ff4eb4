"""The extraction rules, one test each, and the two shapes a completion may take
(issue 38 item 2, "Extraction" and "The problem pins the statement")."""

from __future__ import annotations

import pytest

from leanrpc.rewards import EXTRACTION_VERSION, NO_CODE, Problem, extract

PROOF = "theorem t (a b : ℕ) : a + b = b + a := by\n  omega"


def test_the_version_is_reported_with_every_extraction():
    assert extract(PROOF).version == EXTRACTION_VERSION == "leanrpc-extract/1"
    assert extract("nothing").version == EXTRACTION_VERSION


@pytest.mark.parametrize("tag", ["lean", "lean4", "Lean4", ""])
def test_fence_a_tagged_or_untagged_block(tag):
    got = extract(f"Here it is:\n```{tag}\n{PROOF}\n```\nDone.")
    assert (got.code, got.rule) == (PROOF, "fence")


def test_fence_last_by_default_first_when_asked():
    text = "```lean\nfirst := by simp\n```\nthen\n```lean\nsecond := by omega\n```"
    assert extract(text).code == "second := by omega"
    assert extract(text, fence="first").code == "first := by simp"
    with pytest.raises(ValueError):
        extract(text, fence="middle")


def test_fence_left_open_by_a_stopped_generation_counts():
    assert extract(f"```lean\n{PROOF}").code == PROOF


def test_fence_of_another_language_is_not_lean():
    got = extract("```python\nprint(1)\n```")
    assert got.rule == NO_CODE and got.code == ""


def test_special_tokens_are_removed():
    text = (
        "<|im_start|>assistant\n```lean4\n" + PROOF + "\n```<|im_end|><|endoftext|>"
        "<｜end▁of▁sentence｜>"
    )
    got = extract(text)
    assert got.code == PROOF and "special_tokens" in got.cleaned


def test_reasoning_closed_and_unclosed_tags_are_removed():
    decoy = "<think>maybe\n```lean\ntheorem wrong : False := sorry\n```\n</think>"
    got = extract(decoy + f"\n```lean\n{PROOF}\n```")
    assert got.code == PROOF and "reasoning" in got.cleaned
    # a closing tag alone: the template opened it in the prompt
    assert extract(f"```lean\nx\n```</think>```lean\n{PROOF}\n```").code == PROOF
    # still thinking when generation stopped: nothing after the tag is an answer
    assert extract(f"<think>```lean\n{PROOF}\n```").rule == NO_CODE


@pytest.mark.parametrize(
    "text",
    [PROOF, "import Mathlib\n" + PROOF, ":= by omega", "by\n  omega", "  nlinarith [sq_nonneg a]"],
)
def test_bare_lean_without_a_fence(text):
    got = extract(text)
    assert (got.rule, got.code) == ("bare", text.strip("\n"))


@pytest.mark.parametrize("text", ["", "I cannot prove this.", "The answer is 42.", "```\n\n```"])
def test_no_code(text):
    assert extract(text).rule == NO_CODE


def test_a_str_is_required():
    with pytest.raises(TypeError):
        extract(["not", "a", "str"])


STATEMENT = "theorem t (a b : ℕ) (h : a ≤ b) :\n  a + b ≤ 2 * b := by\n"
HEADER = "import Mathlib\nopen Nat\n"


def test_the_reference_is_the_statement_with_its_header_and_sorry():
    assert Problem(STATEMENT, HEADER).reference == (
        "import Mathlib\nopen Nat\n\ntheorem t (a b : ℕ) (h : a ≤ b) :\n  a + b ≤ 2 * b := by sorry\n"
    )
    # no header: the statement's own lines above it, else import Mathlib
    assert Problem("theorem t : 1 = 1 := by sorry").reference.startswith("import Mathlib\n\n")
    own = Problem("import Mathlib\nopen Real\n\ntheorem t : π > 3 := by sorry")
    assert own.reference == "import Mathlib\nopen Real\n\ntheorem t : π > 3 := by sorry\n"


@pytest.mark.parametrize(
    "code, body",
    [
        (":= by\n  omega", ":= by\n  omega"),
        ("by omega", ":= by omega"),
        ("omega", ":= by\n  omega"),
        ("  have := h\n  omega", ":= by\n  have := h\n  omega"),
    ],
)
def test_a_proof_follows_the_statement(code, body):
    program, shape = Problem(STATEMENT, HEADER).program(code)
    assert shape == "proof"
    assert program == f"{HEADER}\ntheorem t (a b : ℕ) (h : a ≤ b) :\n  a + b ≤ 2 * b {body}\n"


def test_a_whole_file_gets_the_header_only_when_it_has_no_imports():
    file = "theorem t (a b : ℕ) (h : a ≤ b) : a + b ≤ 2 * b := by omega"
    assert Problem(STATEMENT, HEADER).program(file) == (f"{HEADER}\n{file}\n", "file")
    own = "import Mathlib\n\n" + file
    assert Problem(STATEMENT, HEADER).program(own) == (own + "\n", "file")
