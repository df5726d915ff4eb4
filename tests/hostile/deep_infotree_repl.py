"""A fake REPL (tests/hostile/test_deep_infotree.py): every command is answered
honestly, except one whose text holds `deep=N`, which gets an infotree N nodes
deep (each node's only child the next), as a hostile or broken REPL might send."""

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fake_repl_loop import fence_answer, version_messages  # noqa: E402

PLACEHOLDER = "@@infotree@@"


def _deep(depth: int) -> str:
    # Written by hand: json.dumps would recurse too deep to write it.
    return '{"node":{"kind":"TacticInfo"},"children":[' * depth + "]}" * depth


def main() -> None:
    env = 0
    lines = []
    for line in sys.stdin.buffer:
        if line.strip():
            lines.append(line)
            continue
        if not lines:
            continue
        obj, lines = json.loads(b"".join(lines)), []
        if "path" in obj:
            os.write(1, json.dumps(fence_answer(obj)).encode() + b"\n\n")
            continue
        code = obj.get("cmd", "")
        out: dict = {"env": env}
        env += 1
        if "Lean.versionString" in code:
            out["messages"] = version_messages("4.19.0 (deep infotree fake)")
        match = re.search(r"deep=(\d+)", code)
        text = json.dumps(out)
        if match:
            out["infotree"] = PLACEHOLDER
            text = json.dumps(out).replace(f'"{PLACEHOLDER}"', _deep(int(match.group(1))))
        os.write(1, text.encode() + b"\n\n")


if __name__ == "__main__":
    main()
