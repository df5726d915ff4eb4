"""A hostile REPL for the code policy: it answers honestly (a command with
`bad` gets an error, `sorry` a sorry with a proof state, each `#print axioms`
line the standard axioms placed on its line, each command the next env id,
`{"path": …}` the IO error the fence expects), except that whenever a
command or tactic contains code-running text it does what such code could do
inside real Lean on the REPL's main thread: it answers VALID for it (fence
and all) and appends the offending text to the file named by its first
argument. Under the `proof` policy that file must stay empty. (The server's
own identity probe, `#eval Lean.versionString`, is its text, not a snippet's.)

With `sticky` as its second argument it keeps lying, as code left behind in
the process could (a thread that patches the REPL's memory): once it has
fired, every later command is answered VALID too."""

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fake_repl_loop import serve, version_messages  # noqa: E402 (tests/, put on the path above)

MARKERS = (
    "#eval",
    "#exit",
    "run_cmd",
    "run_elab",
    "run_meta",
    "run_tac",
    "elab ",
    "elab_rules",
    "macro ",
    "macro_rules",
    "syntax ",
    "initialize",
    "unsafe",
    "implemented_by",
    "extern",
    "native_decide",
    "debug.skipKernelTC",
    "reduceBool",
    "+native",
)
STATE = {"env": 0, "proof_state": 0, "fired": False}
STICKY = sys.argv[2:3] == ["sticky"]


def fired(text: str) -> None:
    with open(sys.argv[1], "a", encoding="utf-8") as log:
        log.write(json.dumps(text) + "\n")


def answer(obj: dict) -> dict:
    text = obj.get("cmd", obj.get("tactic", ""))
    # The server's own identity probe is the one #eval a REPL gets from it.
    if text != "#eval Lean.versionString" and any(marker in text for marker in MARKERS):
        fired(text)
        STATE["fired"] = True
        if "tactic" in obj:
            STATE["proof_state"] += 1
            return {"proofState": STATE["proof_state"], "goals": [], "proofStatus": "Completed"}
        env, STATE["env"] = STATE["env"], STATE["env"] + 1
        out = {"env": env}  # the forged verdict: clean, whatever the snippet proves
        if checks := _axiom_answers(text):  # its checks answered clean too, as a forger would
            out["messages"] = checks
        return out
    if "tactic" in obj:
        STATE["proof_state"] += 1
        if "bad" in text:
            return {"message": "Lean error:\nunknown tactic"}
        return {"proofState": STATE["proof_state"], "goals": [], "proofStatus": "Completed"}
    if "env" in obj and obj["env"] is not None and obj["env"] >= STATE["env"]:
        return {"message": "Unknown environment."}
    env, STATE["env"] = STATE["env"], STATE["env"] + 1
    out = {"env": env}
    checks = _axiom_answers(text)
    if checks:  # the axiom check, alone or on the lines after the body in its command
        out["messages"] = checks
    if STICKY and STATE["fired"] and "Lean.versionString" not in text:
        return out  # still lying for whatever comes next (its checks answered clean)
    body = text[: _first_check(text)]
    if "Lean.versionString" in text:
        out["messages"] = version_messages("4.19.0 (forging fake)")
    elif "bad" in body:
        out["messages"] = [
            *checks,
            {
                "severity": "error",
                "pos": {"line": 1, "column": 0},
                "endPos": {"line": 1, "column": 3},
                "data": "type mismatch (forging fake)",
            },
        ]
    elif "sorry" in body:
        state = STATE["proof_state"]
        STATE["proof_state"] += 1
        out["sorries"] = [
            {
                "pos": {"line": 1, "column": 8},
                "endPos": {"line": 1, "column": 13},
                "goal": "⊢ True",
                "proofState": state,
            }
        ]
        out["messages"] = [
            *checks,
            {
                "severity": "warning",
                "pos": {"line": 1, "column": 8},
                "endPos": {"line": 1, "column": 13},
                "data": "declaration uses 'sorry'",
            },
        ]
    return out


_ASKED = re.compile(r"^#print axioms (\S+)", re.M)


def _first_check(text: str) -> int:
    """Where the first `#print axioms` line starts (the end of the body), or the text's end."""
    found = _ASKED.search(text)
    return len(text) if found is None else found.start()


def _resolved(name: str) -> str:
    """The name Lean prints for the constant `name` resolves to (no `_root_.`, no `«»`)."""
    return name.removeprefix("_root_.").replace("«", "").replace("»", "")


def _axiom_answers(text: str) -> list:
    """Every name asked by a `#print axioms` line, standard axioms, placed on its line."""
    return [
        {
            "severity": "info",
            "pos": {"line": line, "column": 0},
            "endPos": {"line": line, "column": 6},
            "data": f"'{_resolved(found[1])}' depends on axioms: [propext]",
        }
        for found in _ASKED.finditer(text)
        for line in [text.count("\n", 0, found.start()) + 1]
    ]


def main() -> None:
    serve(answer)


if __name__ == "__main__":
    main()
