"""Replay: every recorded transcript byte for byte, id renumbering, Kimina proofs."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from leanrpc.standin import fixtures, kimina, record
from leanrpc.standin.jsonfmt import flat, pretty
from standin_support import FIXTURES, run_standin

# Transcripts (relative to the fixtures root) that the stand-in cannot
# reproduce byte for byte, with the reason. Keep this as short as possible.
UNREPRODUCIBLE: dict[str, str] = {}

SETS = fixtures.fixture_sets(str(FIXTURES))


def test_index_builds_without_problems():
    raw = record.build(str(FIXTURES))
    transcript_problems = [p for p in raw["problems"] if not p.startswith("kimina/")]
    assert transcript_problems == []
    # the only Kimina entries left out are the four the server timed out on
    assert sorted(p.split(":")[0] for p in raw["problems"] if p.startswith("kimina/")) == [
        "kimina/goedel-lean_workbook_10036",
        "kimina/goedel-lean_workbook_10090",
        "kimina/goedel-lean_workbook_10303",
        "kimina/goedel-lean_workbook_1036",
    ]


def test_lean_printer_reproduces_every_recorded_response():
    count = 0
    for path in sorted(FIXTURES.rglob("*.expected.out")):
        for frame in fixtures.split_responses(path.read_text(encoding="utf-8")):
            obj = json.loads(frame)
            assert pretty(obj) == frame, path
            assert "\n" not in flat(obj)
            count += 1
    assert count > 900


@pytest.mark.parametrize("name, version, fork, root", SETS, ids=[s[0] for s in SETS])
def test_every_fixture_pair_replays_byte_exact(name, version, fork, root, tmp_path):
    # A private copy: pickles are written next to the transcripts, and later
    # transcripts read them (pickle_open -> pickle_open_2 ...), as upstream.
    copy = tmp_path / name
    shutil.copytree(root, copy)
    args = ["--pretty", "--fixtures", str(FIXTURES), "--lean-version", version] + (
        ["--fork"] if fork else []
    )
    failures = []
    checked = 0
    for in_path, cwd in fixtures.transcripts(str(copy)):
        out_path = in_path[:-3] + ".expected.out"
        rel = f"{name}:{in_path[len(str(copy)) + 1 : -3]}"
        try:
            with open(out_path, "rb") as f:
                expected = f.read()
        except FileNotFoundError:
            continue  # upstream has no recording for it either
        with open(in_path, "rb") as f:
            r = run_standin(args, f.read(), cwd=cwd)
        checked += 1
        if r.returncode != 0 or r.stdout != expected:
            failures.append(rel)
    assert checked > 0
    assert sorted(failures) == sorted(k for k in UNREPRODUCIBLE if k.startswith(name + ":"))


def test_compact_replay_has_the_same_content(tmp_path):
    name, version, fork, root = SETS[0]
    copy = tmp_path / name
    shutil.copytree(root, copy)
    for in_path, cwd in fixtures.transcripts(str(copy))[:25]:
        try:
            expected = open(in_path[:-3] + ".expected.out", encoding="utf-8").read()
        except FileNotFoundError:
            continue
        with open(in_path, "rb") as f:
            r = run_standin(
                ["--fixtures", str(FIXTURES), "--lean-version", version], f.read(), cwd=cwd
            )
        got = fixtures.split_responses(r.stdout.decode())
        assert [json.loads(x) for x in got] == [
            json.loads(x) for x in fixtures.split_responses(expected)
        ]
        assert all("\n" not in x for x in got)


def test_replay_renumbers_ids(standin):
    p = standin("--lean-version", "4.33.0-rc2", fixtures=True)
    # use up some ids in plausible mode first
    r = p.request({"cmd": "theorem warmup : 2 = 2 := by sorry"})
    assert (r["env"], r["sorries"][0]["proofState"]) == (0, 0)
    # then the README transcript (test/readme.in): same answers, shifted ids
    r = p.request({"cmd": "def f (x : Unit) : Nat := by sorry"})
    assert r["env"] == 1 and r["sorries"][0]["proofState"] == 1
    r = p.request({"tactic": "apply Int.natAbs", "proofState": 1})
    # only the recording knows this goal: plausible mode would keep `⊢ Nat`
    assert r == {
        "proofStatus": "Incomplete: open goals remain",
        "proofState": 2,
        "goals": ["x : Unit\n⊢ Int"],
    }
    assert p.request({"tactic": "exact -37", "proofState": 2}) == {
        "proofStatus": "Completed",
        "proofState": 3,
        "goals": [],
    }


def test_replay_prefers_the_requested_lean_version(standin):
    cmd = {"cmd": "def f (x : Unit) : Nat := by sorry"}
    new = standin("--lean-version", "4.33.0-rc2", fixtures=True).request(cmd)
    old = standin("--lean-version", "4.9.0", fixtures=True).request(cmd)
    assert new["messages"][0]["data"] == "declaration uses `sorry`"
    assert old["messages"][0]["data"] == "declaration uses 'sorry'"


def test_replay_only_in_the_recorded_state(standin):
    p = standin("--lean-version", "4.33.0-rc2", fixtures=True)
    # test/def_eval: `#check (rfl : f = 37)` on env 0 made by `def f := 37`
    assert p.request({"cmd": "def f := 37"}) == {"env": 0}
    assert (
        p.request({"cmd": "#check (rfl : f = 37)", "env": 0})["messages"][0]["data"]
        == "rfl : f = f"
    )
    # same text on another env: not the recorded situation, so no replay
    assert p.request({"cmd": "def f := 38"}) == {"env": 2}
    assert "messages" not in p.request({"cmd": "#check (rfl : f = 37)", "env": 2})


def test_directive_lines_are_ignored_by_replay_keys(standin):
    p = standin("--lean-version", "4.33.0-rc2", fixtures=True)
    r = p.request({"cmd": "--@standin: panic\ndef f (x : Unit) : Nat := by sorry"})
    # the recorded answer, moved one line down past the directive line
    assert r["sorries"][0]["pos"] == {"line": 2, "column": 29}
    assert r["messages"][0]["pos"] == {"line": 2, "column": 4}
    assert r["messages"][0]["data"] == "declaration uses `sorry`"
    assert r["sorries"][0]["goal"] == "x : Unit\n⊢ Nat"


# --------------------------------------------------------------------------
# Kimina


def _kimina_cases():
    out = []
    for lean_path, json_path in kimina.kimina_pairs(str(FIXTURES)):
        text = open(lean_path, encoding="utf-8").read()
        out.append((lean_path, text, kimina.kimina_response(json_path)))
    return out


def _split(text: str):
    """Like the lead's split_header: imports; open/set_option preamble; padded body."""
    lines = text.split("\n")
    imports = [line for line in lines if line.startswith("import ")]
    body_line = kimina.body_start_line(text)
    body = "\n".join(lines[body_line - 1 :])
    return "\n".join(imports), body_line, body


def _preamble_split(text: str):
    """Variant: leading open/set_option lines of the body go to a separate command."""
    imports, body_line, body = _split(text)
    blines = body.split("\n")
    pre = []
    k = 0
    while k < len(blines) and (
        not blines[k].strip() or re.match(r"(open|set_option)\b", blines[k])
    ):
        pre.append(blines[k])
        k += 1
    return imports, "\n".join(pre), body_line + k, "\n".join(blines[k:])


def test_kimina_replays_every_input(standin):
    cases = _kimina_cases()
    assert len(cases) == 102
    p = standin("--lean-version", "4.9.0", fixtures=True)
    replayed = 0
    for lean_path, text, resp in cases:
        imports, body_line, body = _split(text)
        env = p.request({"cmd": imports})["env"]
        r = p.request({"cmd": "\n" * (body_line - 1) + body, "env": env}, timeout=30)
        assert "env" in r, lean_path
        if not isinstance(resp, dict):
            continue  # the server timed out on it: plausible mode answers
        replayed += 1
        offset = body_line - 1  # recorded lines count from the body's first line
        want = []
        for m in resp.get("messages") or []:
            m = dict(m)
            for k in ("pos", "endPos"):
                if m.get(k):
                    m[k] = dict(m[k], line=m[k]["line"] + offset)
            want.append(m)
        assert r.get("messages", []) == want, lean_path
    assert replayed == 98


def test_kimina_with_preamble_command(standin):
    p = standin(fixtures=True)
    checked = 0
    for lean_path, text, resp in _kimina_cases():
        if not isinstance(resp, dict) or not resp.get("messages"):
            continue
        imports, pre, body_line, body = _preamble_split(text)
        env = p.request({"cmd": imports})["env"]
        if pre.strip():
            env = p.request({"cmd": pre, "env": env})["env"]
        r = p.request({"cmd": "\n" * (body_line - 1) + body, "env": env}, timeout=30)
        first = resp["messages"][0]
        got = r["messages"][0]
        assert got["data"] == first["data"]
        assert got["pos"]["line"] == first["pos"]["line"] + kimina.body_start_line(text) - 1, (
            lean_path
        )
        checked += 1
    assert checked >= 40


def test_kimina_example_offset_is_three(standin):
    # the README's example: recorded line 18 sits on line 21 of the input file
    text = (FIXTURES / "kimina/match/input/goedel-lean_workbook_1001.lean").read_text()
    p = standin(fixtures=True)
    env = p.request({"cmd": "import Mathlib\nimport Aesop"})["env"]
    r = p.request({"cmd": "\n\n\n" + text.split("\n", 3)[3], "env": env})
    assert [m["pos"]["line"] for m in r["messages"]] == [21, 23, 21, 23]
    assert text.split("\n")[20].strip().startswith("<;> simp [Complex.I_sq]")
