"""Well-formedness, Lean message parsing, retrieval and prompts (no model, no event loop)."""

import pytest

from leanrpc.formalize import prompts
from leanrpc.formalize.diagnostics import (
    classify,
    error_category,
    format_errors,
    truncate,
    unknown_identifiers,
)
from leanrpc.formalize.retrieval import MathlibNames
from leanrpc.formalize.wellformed import check, extract_candidate, theorem_name
from leanrpc.formalize.words import name_words, query_words
from leanrpc.results import Message, Position, Severity, Status, VerifyResult
from testkit import shared_path


class TestWellFormed:
    @pytest.mark.parametrize(
        "code",
        [
            "theorem foo (x : ℝ) (h₀ : 0 < x) : x ^ 2 > 0 := by sorry",
            "theorem foo : ∀ n : ℕ, n = n := by\n  sorry",
            "theorem f (s : Finset ℕ) : ∑ i ∈ s, i = s.sum id := by sorry",
            "theorem q {G : Type*} [Group G] (H : Subgroup G) [H.Normal] : ⟨1, H.one_mem⟩ = (1 : H) := by sorry",
            'theorem s : "(" = "(" := by sorry -- (',
            "theorem c /- ( -/ : True := by sorry",
            "theorem d (f : ℕ → ℕ) (h : ∀ x, f x = x) : f 2 = 2 := by sorry",
        ],
    )
    def test_ok(self, code):
        wf = check(code)
        assert wf.ok, wf.reason
        assert wf.reason == ""

    @pytest.mark.parametrize(
        "code, field, reason",
        [
            ("theorem foo (x : ℝ : x = 1 := by sorry", "balanced_delimiters", "unclosed '('"),
            ("theorem foo (x : ℝ)) : x = 1 := by sorry", "balanced_delimiters", "unmatched ')'"),
            ("theorem foo [x : ℝ) : x = 1 := by sorry", "balanced_delimiters", "closed by"),
            ("theorem foo (x : ℝ) := by sorry", "has_theorem_signature", "no type signature"),
            ("theorem  : 1 = 1 := by sorry", "has_theorem_signature", "no name"),
            (
                "lemma foo : 1 = 1 := by sorry",
                "has_theorem_signature",
                "does not start with `theorem`",
            ),
            ("theorem foo (x : ℝ) :  := by sorry", "has_theorem_signature", "empty type"),
            ("theorem foo : 1 = 1", "has_theorem_signature", "no top-level `:=`"),
            (
                "theorem foo (x : ℝ) : x = 1 := by simp",
                "ends_with_by_sorry",
                "does not end with `:= by sorry`",
            ),
            (
                "theorem foo : 1 = 1 := sorry",
                "ends_with_by_sorry",
                "does not end with `:= by sorry`",
            ),
        ],
    )
    def test_failures(self, code, field, reason):
        wf = check(code)
        assert not wf.ok
        assert getattr(wf, field) is False
        assert reason in wf.reason

    def test_extract_from_fenced_prose(self):
        text = (
            "Here it is:\n```lean\nimport Mathlib\nopen Real\n/-- doc -/\nlemma x (a : ℝ) : a = a := by\n"
            "  sorry\n\ntheorem y : 2 = 2 := by sorry\n```\nDone."
        )
        assert extract_candidate(text) == "theorem x (a : ℝ) : a = a := by\n  sorry"

    def test_term_mode_sorry_normalized(self):
        assert (
            extract_candidate("theorem a : 1 = 1 :=\n  sorry") == "theorem a : 1 = 1 := by\n  sorry"
        )
        assert check(extract_candidate("theorem a : 1 = 1 := sorry")).ok

    def test_every_benchmark_reference_is_well_formed(self):
        """No false alarms on 855 human-written statements (miniF2F + ProofNet-Verified)."""
        import json

        files = [
            (
                shared_path("datasets", "minif2f-proofnet-putnam-goedel-prover", "minif2f.jsonl"),
                "formal_statement",
                " sorry",
            ),
            (
                shared_path("datasets", "proofnet-verified", "proofnet-verified.jsonl"),
                "formal_stmt",
                "",
            ),
        ]
        n = 0
        for path, field, suffix in files:
            for line in path.read_text().splitlines():
                ref = json.loads(line)[field].rstrip() + suffix
                wf = check(extract_candidate(ref))
                assert wf.ok, (ref, wf.reason)
                n += 1
        assert n == 855

    def test_extract_raw_and_garbage(self):
        assert (
            extract_candidate("theorem a : 1 = 1 := by sorry\n```\nmore")
            == "theorem a : 1 = 1 := by sorry"
        )
        assert extract_candidate("  no declaration here ") == "no declaration here"
        assert theorem_name("theorem my_thm' (x : ℕ) : x = x := by sorry") == "my_thm'"


class TestDiagnostics:
    def _msg(self, text, sev=Severity.ERROR, line=3):
        return Message(sev, Position(line, 4), Position(line, 9), text)

    @pytest.mark.parametrize(
        "text, name",
        [
            ("unknown identifier 'Nat.foo'", "Nat.foo"),
            ("unknown constant 'Real.bar'", "Real.bar"),
            ("Unknown identifier `Real.sqrt_foo`", "Real.sqrt_foo"),
            ("Unknown constant `Nat.baz`", "Nat.baz"),
            ("unknown identifier 'Nat.prime_def_lt''", "Nat.prime_def_lt'"),
            ("unknown identifier 'x.y'\nmore text", "x.y"),
            ("Unknown identifier `Nat.«weird name»`", "Nat.weird name"),
        ],
    )
    def test_unknown_identifier_spellings(self, text, name):
        assert unknown_identifiers([self._msg(text)]) == [name]

    def test_unknown_ignores_warnings_and_dedups(self):
        msgs = [
            self._msg("unknown identifier 'A.b'", Severity.WARNING),
            self._msg("unknown identifier 'C.d'"),
            self._msg("Unknown identifier `C.d`"),
        ]
        assert unknown_identifiers(msgs) == ["C.d"]

    @pytest.mark.parametrize(
        "text, cat",
        [
            ("unknown identifier 'x'", "unknown_ident"),
            ("Unknown constant `Foo.bar`", "unknown_ident"),
            ("unexpected token ':='; expected term", "syntax"),
            ("expected term", "syntax"),
            ("failed to synthesize\n  HAdd ℕ ℝ ?m", "typeclass"),
            ("type mismatch\n  h\nhas type\n  a : Prop", "type_mismatch"),
            ("application type mismatch", "type_mismatch"),
            ("unsolved goals", "other"),
        ],
    )
    def test_classify(self, text, cat):
        assert classify(text) == cat

    def test_error_category_uses_first_error(self):
        r = VerifyResult(
            id="",
            status=Status.INVALID,
            messages=[
                self._msg("declaration uses 'sorry'", Severity.WARNING),
                self._msg("failed to synthesize"),
                self._msg("unknown identifier 'x'"),
            ],
        )
        assert error_category(r) == "typeclass"
        assert error_category(VerifyResult(id="", status=Status.SORRY)) is None

    def test_format_errors_relative_lines_and_truncation(self):
        r = VerifyResult(
            id="",
            status=Status.INVALID,
            messages=[self._msg("x" * 2000, line=5), self._msg("note", Severity.INFO)],
        )
        text = format_errors(r, line_offset=2, limit=800)
        assert text.startswith("line 3, col 4: xxx")
        assert len(text) == 800 and text.endswith("[truncated]")
        assert "note" not in text
        assert truncate("short", 800) == "short"

    def test_format_errors_falls_back_to_error_string(self):
        r = VerifyResult(id="", status=Status.TIMEOUT, error="ran past 60 s")
        assert format_errors(r) == "ran past 60 s"


class TestRetrieval:
    def test_words(self):
        assert name_words("Nat.Prime.two_le") == ["nat", "prime", "two", "le"]
        assert name_words("IsNormalSubgroup") == ["is", "normal", "subgroup"]
        assert "real" in query_words(r"Let $x \in \mathbb{R}$ be a real number")
        assert "prime" in query_words("for all primes p")

    def test_did_you_mean_small(self, small_names):
        assert small_names.did_you_mean("Nat.prme_two_le")[0] == "Nat.Prime.two_le"
        assert small_names.did_you_mean("nat.prime")[0] == "Nat.Prime"
        assert set(small_names.did_you_mean("sqrt")[:2]) == {"Nat.sqrt", "Real.sqrt"}
        assert small_names.did_you_mean("Completely.different_thing_xyz") == []
        assert small_names.did_you_mean("") == []
        assert "Nat.Prime" in small_names and "Nat.prime" not in small_names

    def test_search_small(self, small_names):
        top = [
            n for n, _, _ in small_names.search("Show that every prime number p is at least 2", 3)
        ]
        assert top[0] in ("Nat.Prime", "Nat.Prime.two_le")
        assert small_names.search("zzz qqq", 3) == []

    def test_full_list(self, full_names):
        assert len(full_names) > 170_000
        assert "Nat.Prime.two_le" in full_names.did_you_mean("Nat.prme_two_le")
        assert full_names.did_you_mean("Real.sqrt_nonneg_foo")[0] == "Real.sqrt_nonneg"
        # one-letter typos in short names (System A's character-level source, rapidfuzz)
        for typo, name in (
            ("Real.logg", "Real.log"),
            ("Nat.Prme", "Nat.Prime"),
            ("Real.sqrrt", "Real.sqrt"),
            ("Finset.rnge", "Finset.range"),
        ):
            assert full_names.did_you_mean(typo)[0] == name, typo
        names = [
            n
            for n, _, _ in full_names.search(
                "Let G be a finite group and H a normal subgroup of G.", 8
            )
        ]
        assert "Subgroup.Normal" in names

    def test_from_tsv_rejects_wrong_header(self, tmp_path):
        p = tmp_path / "x.tsv"
        p.write_text("a\tb\tc\nX\tdef\tM\n")
        with pytest.raises(ValueError):
            MathlibNames.from_tsv(str(p))
        p.write_text("name\tkind\tmodule\nX.y\tdef\tMathlib.M\n")
        assert MathlibNames.from_tsv(str(p)).names == ["X.y"]


class TestPrompts:
    def test_first_prompt(self):
        task = prompts.task_message(
            "Two plus two is four.",
            "import Mathlib",
            [("Nat.add", "def", "Init"), ("Nat.add_comm", "theorem(to_additive:guessed)", "M")],
        )
        msgs = prompts.build_messages(task)
        assert [m["role"] for m in msgs] == ["system", "user"]
        assert "`Nat.add_comm` (theorem, M)" in msgs[1]["content"]
        assert "import Mathlib" in msgs[1]["content"] and "Two plus two" in msgs[1]["content"]

    def test_repair_prompt(self):
        fb = prompts.feedback_message(
            errors="line 1: boom", suggestions={"Nat.prme": ["Nat.Prime"], "Zzz.q": []}
        )
        msgs = prompts.build_messages("task", "theorem a : 1 = 1 := by sorry", fb)
        assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
        assert msgs[2]["content"].startswith(prompts.ASSISTANT_PREFIX)
        assert "did you mean `Nat.Prime`?" in msgs[3]["content"]
        assert "No similar Mathlib name was found for: `Zzz.q`" in msgs[3]["content"]
        assert "boom" in msgs[3]["content"]


def test_dense_stage_embeds_once_caches_and_reranks(tmp_path):
    """System B's dense stage with the default embedder (WordLlama, weights from its wheel)."""
    from formalize_support import SMALL_NAMES
    from leanrpc.formalize.dense import WordLlamaEmbedder, make_embedder
    from leanrpc.formalize.retrieval import MathlibNames

    assert make_embedder("none") is None
    with pytest.raises(ValueError):
        make_embedder("bert")
    names = MathlibNames(SMALL_NAMES)
    embedder = WordLlamaEmbedder()
    names.enable_dense(embedder, tmp_path, dense_n=5)
    assert not names.dense.from_cache and names.dense.cache_path.is_file()
    vectors = names.dense.matrix
    assert vectors.shape == (len(SMALL_NAMES), 256)
    again = MathlibNames(SMALL_NAMES)
    again.enable_dense(embedder, tmp_path, dense_n=5)
    assert again.dense.from_cache  # embedded once, then read from disk
    text = "Show that every prime number p is at least 2"
    idx, cos = names.dense.top(text, 5)
    assert len(idx) == 5 and list(cos) == sorted(cos, reverse=True)
    got = names.search(text, 3)
    dense_top = {names.names[i] for i in idx}
    assert got and {n for n, _, _ in got} <= dense_top  # the rerank picks among the dense top-n
    assert [n for n, _, _ in names.search(text, 3, dense=False)][0] in (
        "Nat.Prime",
        "Nat.Prime.two_le",
    )
