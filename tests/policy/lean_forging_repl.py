"""A hostile REPL that reads Lean as Lean does (issue 43 item 4): it answers
honestly, except that whenever a command or tactic holds text Lean would run
as code, as the independent reading of Lean's tokenizer finds it
(lean_reference.code_running: a glued `#eval`, `run_cmd«IO»`, a keyword
after a lexing error, a native `decide` configuration, …), it forges a clean
VALID (the fence included: it answers the fence's `{"path": …}` as expected)
and appends the text to the file named by its first argument. Under the
`proof` policy that file stays empty at every door."""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import forging_repl  # noqa: E402 (tests/policy, put on the path above)
from fake_repl_loop import serve  # noqa: E402
from lean_reference import code_running  # noqa: E402

PROBE = "#eval Lean.versionString"


def answer(obj: dict) -> dict:
    text = obj.get("cmd", obj.get("tactic", ""))
    if text and text != PROBE and code_running(text):
        with open(sys.argv[1], "a", encoding="utf-8") as log:
            log.write(json.dumps(text) + "\n")
        if "tactic" in obj:
            forging_repl.STATE["proof_state"] += 1
            return {
                "proofState": forging_repl.STATE["proof_state"],
                "goals": [],
                "proofStatus": "Completed",
            }
        env = forging_repl.STATE["env"]
        forging_repl.STATE["env"] += 1
        return {"env": env}  # the forged verdict
    return forging_repl.answer(obj)


if __name__ == "__main__":
    serve(answer)
