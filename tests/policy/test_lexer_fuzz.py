"""The fuzzer (issue 43 item 3): token soups glued from keywords, `#`
commands, comments, strings, chars, `«»` names, numbers and symbols in every
order, read by the policy and by a second, independent reading written from
Lean's source (lean_reference.py). Either they agree or the policy refuses:

- whatever the reference reads as code that runs (a refused keyword, a `#`
  command outside the allow-list, an attribute or option outside its list),
  the policy refused; a native name it reads, the policy refused or reported;
- where the reference hits a lexing error, it reads on one character later,
  as Lean's recovery does: what it reads there counts too;
- where both read the whole text, the one lexer's identifiers, numbers and
  literals are the reference's (texts without `#`, `{` or field indices).

CI runs a fixed seed and a bounded budget; `python -m benchmarks.lexer_fuzz`
runs the same check longer.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from lean_reference import dangers, is_id_first, native_names, read, read_recovering
from leanrpc.core.lexer import LexError, lex
from leanrpc.policy import scan

PIECES = [
    # keywords and commands
    "#eval", "#eval!", "#check", "#print", "#exit", "#", "#[", "]'", "Σ'", "run_cmd", "run_tac", "elab",
    "macro", "unsafe", "initialize", "set_option", "attribute", "@[", "[", "]", "theorem",
    "def", "by", "trivial", "decide", "+native", "native_decide", "IO.println", "in",
    "debug.skipKernelTC", "maxHeartbeats", "implemented_by", "simp", "deprecated", "notation",
    "s!", "throwError", ":=", "=>", "true", "x", "h'", "t.1",
    # comments
    "--", "/-", "-/", "/--", "/-!", "\n",
    # strings, chars, raw strings
    '"', '"x"', '"{"', '"}"', '"{x}"', '\\"', "'", "'a'", "'\"'", "'\\''", "''", "r\"", 'r#"',
    '"#', "#\"",
    # names and numbers
    "«", "»", "«IO»", "«native»", "`x", "1", "2.5", "0x1F", "1e3", ".",
    # symbols
    "∑'", "(", ")", "{", "}", ",", "-", "/", "⟨", "⟩", " ", " ", " ",
]  # fmt: skip

soups = st.lists(st.sampled_from(PIECES), min_size=1, max_size=24).map("".join)


def _spans(text: str) -> tuple[set, set] | None:
    mine = lex(text)
    ref, error = read(text)
    if error is not None:
        return None
    ours = {
        (t.start, t.end) for t in mine if t.kind in ("ident", "num", "str", "char", "name", "raw")
    }
    theirs = {(s, e) for kind, s, e, value in ref if kind != "atom" or is_id_first(value[0])}
    return ours, theirs


def check(text: str) -> None:
    verdict = scan(text)
    if verdict.refused:
        return  # failing closed is always an answer
    for tokens in read_recovering(text):
        assert not dangers(tokens), (text, dangers(tokens))
        if native_names(tokens):
            assert verdict.native, text
    if "#" in text or "{" in text or re.search(r"\.[0-9]", text):
        return  # `#`-words, interpolation and field indices: the parser's, not the tokenizer's
    try:
        spans = _spans(text)
    except LexError:
        return
    if spans is not None:
        assert spans[0] == spans[1], (text, spans)


@seed(43)
@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(soups)
def test_policy_and_reference_agree_or_the_policy_refuses(text):
    check(text)


def test_the_issue_causes_are_read_alike():
    for text in (
        '#evalIO.println "x"',
        'theorem t : True := trivial#eval IO.println "x"',
        'run_cmd«IO».println "x"',
        "set_option«debug».skipKernelTC true in theorem t : True := trivial",
        '@[deprecated "]", implemented_by g] def f := 1',
        "def b := 1'\"'\n#eval IO.println 1 -- \"",
        "theorem t : 2 + 2 = 4 := by decide +«native»",
        'theorem s : "{" ++ "}" = "{}" := rfl',
    ):
        check(text)


def test_what_the_long_fuzzer_found_is_refused():
    """Long runs of `python -m benchmarks.lexer_fuzz` (2026-12-06). The first (3.7 million
    soups) found a `'` glued to an allowed `#`-word: the policy read the command token, a
    char literal and a line comment; where the word is no token (Mathlib's `#align`, gone
    from today's Mathlib), Lean reads `#`, an identifier `align'` and a string, and the code
    after it runs."""
    for text in (
        "defdeprecated#simp'\"'attribute--/)decideimplemented_by{/-#[#exitdecidedecide"
        '#printdeprecated,\\"\\"/-! IO.println\\""}"1macro',
        '#simp\'"\' -- "}"1macro',
        # a second run (seed 2026, 1.4 million soups): a bracket where an attribute's name
        # is due had been read as an argument (the reference reads no name there)
        "+native#[@[(\nimplemented_bythrowError]deprecated]\"}\"{'\\''»«native»⟩''r\"max"
        'HeartbeatsIO.printlnbyx#simpmacro 2.5r"1,throwError',
        # `--more` runs (seeds 5150 and 8086): a `#`-word glued to `.r` (Lean's name
        # `norm_num.r` where the word is no token, where the policy read a raw string), and
        # a `#eval` in a string's piece after a hole the reference could not parse
        '0#/--a-/#norm_num.r#"|>.attribute«native»r#"attribute[run_cmd›.#S``(s!simp/--a-/"{x}"'
        '⟩simpf!"{"}"#exit+native',
        'Σ\'(since := "x")f!"{‹.trivialdeprecated0#⟨}ℝ≥0‹=>#evalh\'"‹«native»2.5%',
    ):
        check(text)
        assert scan(text).refused, text
    escape = "theorem t : True := trivial\n#align'\"' -- \" #eval IO.println 1\n"
    assert scan(escape).refused and "a `#`-word glued" in scan(escape).reason
    assert not scan("theorem t : True := trivial\n#check 'a'\n").refused  # a space: no doubt
