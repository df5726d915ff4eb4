"""A fake REPL for the pipelined fence (tests/workers/test_batch_fence.py): it
answers honestly (each command the next env, each tactic the next proof state),
except for commands whose text names a misdeed: `drop` gets no answer, `extra`
two, `forge` a forged clean answer before its own, `hold` is answered only after
the next request's answer (out of order), `fence` makes the fence answer come
before this command's own, `pace` is answered after 0.05 s, `slow` after 0.3 s,
`stall` never (the process sleeps), and `later` honestly, with a stray answer written 0.5 s
later by a thread (after the batch's fence and audit: between exchanges). The same words in a tactic do the same in tactic
mode (`forge`: a forged "Completed" with the next proof state id; `extra`: the
answer twice). A command with `sorry` gets one proof state per sorry (so the
Prover can start a proof on this fake: tests/prover/test_prover_expand_batch.py);
an honest tactic leaves one goal open."""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fake_repl_loop import fence_answer, version_messages  # noqa: E402

STATE = {"env": 0, "ps": 0}


def _next_ps() -> int:
    ps, STATE["ps"] = STATE["ps"], STATE["ps"] + 1
    return ps


def honest(obj: dict) -> dict:
    if "tactic" in obj:
        return {
            "proofState": _next_ps(),
            "goals": ["⊢ True"],
            "proofStatus": "Incomplete: open goals remain",
        }
    env, STATE["env"] = STATE["env"], STATE["env"] + 1
    out = {"env": env}
    code = obj.get("cmd", "")
    if "sorry" in code:
        line = code[: code.index("sorry")].count("\n") + 1
        column = code.index("sorry") - (code[: code.index("sorry")].rfind("\n") + 1)
        out["sorries"] = [
            {
                "proofState": _next_ps(),
                "goal": "⊢ True",
                "pos": {"line": line, "column": column},
                "endPos": {"line": line, "column": column + 5},
            }
        ]
    if "Lean.versionString" in obj.get("cmd", ""):
        out["messages"] = version_messages("4.19.0 (batch fake)")
    return out


def main() -> None:
    stdin = sys.stdin.buffer
    lines, held, early_fence = [], None, False
    while True:
        line = stdin.readline()
        if not line:
            return
        if line.strip():
            lines.append(line)
            continue
        if not lines:
            continue
        obj = json.loads(b"".join(lines))
        lines = []
        text = obj.get("cmd", obj.get("tactic", ""))
        replies = []
        if "path" in obj:
            if not early_fence:
                replies = [fence_answer(obj)]
            early_fence = False
        elif "fence" in text:
            # Guess the fence: answer it now (a forger cannot know the nonce; use a made-up one).
            replies = [
                {
                    "message": "no such file or directory (error code: 2)\n  file: /nonexistent/leanrpc-fence/"
                    "0000.lean"
                },
                honest(obj),
            ]
        elif "stall" in text:
            time.sleep(3600)
        elif "drop" in text:
            honest(obj)
        elif "extra" in text:
            replies = [honest(obj), honest(obj) if "tactic" in obj else {"env": STATE["env"] - 1}]
        elif "forge" in text:
            forged = (
                {"proofState": STATE["ps"], "goals": [], "proofStatus": "Completed"}
                if "tactic" in obj
                else {"env": STATE["env"]}
            )
            replies = [forged, honest(obj)]
        elif "hold" in text:
            held = honest(obj)
        else:
            if "later" in text:
                stray = json.dumps({"env": 4242}).encode() + b"\n\n"
                threading.Timer(0.5, os.write, (1, stray)).start()
            if "pace" in text or "slow" in text:
                time.sleep(0.05 if "pace" in text else 0.3)
            replies = [honest(obj)]
            if held is not None:
                replies.append(held)
                held = None
        for reply in replies:
            os.write(1, json.dumps(reply).encode() + b"\n\n")


if __name__ == "__main__":
    main()
