"""Plausible mode: deterministic, correctly shaped answers for unrecorded input."""

from __future__ import annotations

from leanrpc.standin import elab
from leanrpc.standin.jsonfmt import escape_string, flat, pretty

SORRY = "declaration uses `sorry`"


def _pos(line, col):
    return {"line": line, "column": col}


def test_lean_string_escaping():
    assert (
        escape_string('a"b\\c\nd\re\tf\x01g⊢𝓝\x7f') == '"a\\"b\\\\c\\nd\\re\\u0009f\\u0001g⊢𝓝\x7f"'
    )
    assert (
        flat({"a": 1, "b": [True, None, "x"], "B": {}})
        == '{"b": [true, null, "x"], "a": 1, "B": {}}'
    )
    assert pretty({"env": 0}) == '{"env": 0}'
    long = {"message": "x" * 90}
    assert pretty(long) == '{"message":\n "' + "x" * 90 + '"}'


def test_sorries_goals_and_warnings(standin):
    p = standin()
    cmd = (
        "theorem foo (a b : Nat) (h : a = b) : b = a := by\n"
        "  have h2 : a = a := by sorry\n"
        "  sorry\n"
        "\n"
        "example : True := by admit\n"
        "lemma bar {α : Type} [Inhabited α] (x : α) : x = x := sorry"
    )
    r = p.request({"cmd": cmd})
    assert r["sorries"] == [
        {
            "proofState": 0,
            "pos": _pos(2, 24),
            "goal": "a b : Nat\nh : a = b\n⊢ a = a",
            "endPos": _pos(2, 29),
        },
        {
            "proofState": 1,
            "pos": _pos(3, 2),
            "goal": "a b : Nat\nh : a = b\n⊢ b = a",
            "endPos": _pos(3, 7),
        },
        {
            "proofState": 2,
            "pos": _pos(6, 54),
            "goal": "α : Type\ninst✝ : Inhabited α\nx : α\n⊢ x = x",
            "endPos": _pos(6, 59),
        },
    ]
    assert r["messages"] == [
        {"severity": "warning", "pos": _pos(1, 8), "endPos": _pos(1, 11), "data": SORRY},
        {"severity": "warning", "pos": _pos(5, 0), "endPos": _pos(5, 7), "data": SORRY},
        {"severity": "warning", "pos": _pos(6, 6), "endPos": _pos(6, 9), "data": SORRY},
    ]
    assert r["env"] == 0


def test_sorry_style_quote(standin):
    p = standin("--sorry-style", "quote")
    r = p.request({"cmd": "theorem t : 1 = 1 := by sorry"})
    assert r["messages"][0]["data"] == "declaration uses 'sorry'"


def test_variables_become_hypotheses(standin):
    p = standin()
    assert p.request({"cmd": "variable (x y : Nat)"}) == {"env": 0}
    r = p.request({"cmd": "theorem t (h : x = y) : y = x := by\n  sorry", "env": 0})
    assert r["sorries"][0]["goal"] == "x y : Nat\nh : x = y\n⊢ y = x"


def test_unknown_identifier_rule(standin):
    p = standin()
    cmd = (
        "theorem t (a b : Nat) : a + b = b + a := by\n"
        "  rw [Nat.add_comm, Nat.nonexistent_lemma]\n"
        "  exact Foo.unknown_thing\n"
        "  simp only [unknown_but_unqualified]\n"
        "  apply Nat.add_comm"
    )
    r = p.request({"cmd": cmd})
    assert r["messages"] == [
        {
            "severity": "error",
            "pos": _pos(2, 20),
            "endPos": _pos(2, 41),
            "data": "Unknown identifier `Nat.nonexistent_lemma`",
        },
        {
            "severity": "error",
            "pos": _pos(3, 8),
            "endPos": _pos(3, 25),
            "data": "Unknown identifier `Foo.unknown_thing`",
        },
    ]
    assert "sorries" not in r


def test_eval_check_and_print_axioms(standin):
    p = standin()
    cmd = (
        "theorem a1 : 2 + 2 = 4 := by norm_num\n"
        "theorem a2 : 2 + 2 = 4 := by native_decide\n"
        "theorem a3 : True := trivial\n"
        "theorem a4 : 1 = 1 := by sorry\n"
        "#print axioms a1\n"
        "#print axioms a2\n"
        "#print axioms a3\n"
        "#print axioms a4\n"
        "#print axioms nope\n"
        "#eval (2 + 3) * 4 - 30\n"
        '#eval "hi"\n'
        "#check a1"
    )
    r = p.request({"cmd": cmd})
    data = [(m["severity"], m["pos"]["line"], m["data"]) for m in r["messages"]]
    assert data == [
        ("warning", 4, SORRY),
        ("info", 5, "'a1' depends on axioms: [propext, Classical.choice, Quot.sound]"),
        ("info", 6, "'a2' depends on axioms: [Lean.ofReduceBool]"),
        ("info", 7, "'a3' does not depend on any axioms"),
        ("info", 8, "'a4' depends on axioms: [propext, sorryAx, Classical.choice, Quot.sound]"),
        ("error", 9, "Unknown constant `nope`"),
        ("info", 10, "0"),
        ("info", 11, '"hi"'),
        ("info", 12, "a1 : 2 + 2 = 4"),
    ]
    # declarations live on in the env chain
    r2 = p.request({"cmd": "#print axioms a2", "env": r["env"]})
    assert r2["messages"][0]["data"] == "'a2' depends on axioms: [Lean.ofReduceBool]"


def test_native_decide_with_other_tactics(standin):
    p = standin()
    r = p.request({"cmd": "theorem t : 10 < 20 := by\n  simp\n  native_decide\n#print axioms t"})
    assert r["messages"][0]["data"] == (
        "'t' depends on axioms: [propext, Classical.choice, Lean.ofReduceBool, Quot.sound]"
    )


def test_all_tactics_root_goals_and_ids(standin):
    p = standin()
    cmd = "theorem t (n : Nat) : n = n := by\n  skip\n  sorry"
    r = p.request({"cmd": cmd, "allTactics": True, "rootGoals": True})
    goal = "n : Nat\n⊢ n = n"
    # sorries first, then root goals, then tactics, then the env
    assert [e["proofState"] for e in r["sorries"]] == [0, 1]
    assert r["sorries"][1] == {
        "proofState": 1,
        "pos": _pos(1, 31),
        "goal": goal,
        "endPos": _pos(1, 31),
    }
    assert [(t["tactic"], t["proofState"], t["goals"]) for t in r["tactics"]] == [
        ("skip", 2, goal),
        ("sorry", 3, goal),
    ]
    assert set(r["tactics"][0]) == {
        "usedConstants",
        "tactic",
        "proofState",
        "pos",
        "goals",
        "endPos",
    }
    assert list(r) == ["tactics", "sorries", "messages", "env"]
    assert r["env"] == 0


def test_infotree_shapes(standin):
    p = standin()
    r = p.request({"cmd": "theorem t : True := by\n  trivial", "infotree": "full"})
    first, eoi = r["infotree"]
    assert first["kind"] == "CommandInfo" and first["node"]["elaborator"]
    assert first["children"][0]["kind"] == "TacticInfo"
    stx = first["children"][0]["node"]["stx"]
    assert set(stx) == {"range", "pp", "kind", "argKinds"}
    assert stx["range"] == {"synthetic": False, "start": _pos(2, 2), "finish": _pos(2, 9)}
    assert eoi["node"]["stx"]["kind"] == "Lean.Parser.Command.eoi"
    r = p.request({"cmd": "theorem t : True := by\n  trivial", "infotree": "substantive"})
    (node,) = r["infotree"]
    assert node["kind"] == "TacticInfo" and node["node"]["goalsBefore"] == ["⊢ True"]
    # unknown filter: ignored; nothing left after filtering: key left out
    assert "infotree" not in p.request({"cmd": "def f := 1", "infotree": "bogus"})
    assert "infotree" not in p.request({"cmd": "def f := 1", "infotree": "tactics"})


def test_tactic_mode(standin):
    p = standin()
    r = p.request({"cmd": "theorem t (p q : Prop) (hp : p) : q → p := by sorry"})
    assert r["sorries"][0]["goal"] == "p q : Prop\nhp : p\n⊢ q → p"
    r = p.request({"tactic": "intro hq", "proofState": 0})
    assert r == {
        "proofStatus": "Incomplete: open goals remain",
        "proofState": 1,
        "goals": ["p q : Prop\nhp : p\nhq : q\n⊢ p"],
    }
    r = p.request({"tactic": "exact hp", "proofState": 1})
    assert r == {"proofStatus": "Completed", "proofState": 2, "goals": []}
    # branching: state 1 is unchanged
    r = p.request({"tactic": "sorry", "proofState": 1})
    assert r == {
        "sorries": [{"proofState": 3, "goal": "p q : Prop\nhp : p\nhq : q\n⊢ p"}],
        "proofStatus": "Incomplete: contains sorry",
        "proofState": 4,
        "goals": [],
    }
    r = p.request({"tactic": "have h : p ∧ p := by sorry", "proofState": 1})
    assert r["sorries"] == [{"proofState": 5, "goal": "p q : Prop\nhp : p\nhq : q\n⊢ p ∧ p"}]
    assert r["proofState"] == 6 and r["proofStatus"] == "Incomplete: open goals remain"
    assert r["goals"] == ["p q : Prop\nhp : p\nhq : q\nh : p ∧ p\n⊢ p"]
    r = p.request({"tactic": "exact Foo.nonexistent", "proofState": 1})
    assert r == {
        "proofStatus": "Incomplete: contains sorry",
        "proofState": 7,
        "messages": [
            {
                "severity": "error",
                "pos": _pos(0, 0),
                "endPos": _pos(0, 0),
                "data": "Unknown identifier `Foo.nonexistent`",
            }
        ],
        "goals": [],
    }
    assert p.request({"tactic": "exat 42", "proofState": 1}) == {
        "message": "Lean error:\n<input>:1:1: unknown tactic"
    }
    assert p.request({"tactic": "rfl", "proofState": 2}) == {
        "message": "Lean error:\nno goals to be proved"
    }
    assert p.request({"tactic": "rfl", "proofState": 99}) == {"message": "Unknown proof state."}
    # errors allocated nothing
    assert p.request({"tactic": "skip", "proofState": 1})["proofState"] == 8


def test_parse_error_for_non_command(standin):
    p = standin()
    r = p.request({"cmd": "this is not lean"})
    assert r["messages"][0]["data"] == "unexpected identifier; expected command"
    assert r["env"] == 0


def test_split_header_and_facts():
    mods, off = elab.split_header(
        "-- c\nimport Mathlib\n/- x -/ import Aesop\n\ntheorem t : True := trivial"
    )
    assert mods == ["Mathlib", "Aesop"]
    assert off == len("-- c\nimport Mathlib\n/- x -/ import Aesop")
    assert elab.module_known("Mathlib.Tactic") and elab.module_known("Batteries")
    assert not elab.module_known("Foo")
    facts = elab.facts_of(
        "namespace A\ntheorem b (n : Nat) : n = n := rfl\nend A\nvariable (k : Nat)"
    )
    assert facts.decls["A.b"][0] == "b (n : Nat) : n = n"
    assert facts.variables == [("k", "Nat", "default")]
