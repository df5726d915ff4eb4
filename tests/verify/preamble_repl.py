"""A fake REPL for preamble tests: speaks the JSON protocol and gives Lean-like
messages for `open Bad...` (an error) and `set_option linter.warnme` (a warning).

It counts envs like the real REPL (one per command), answers File requests
(the fence) with an IO error naming the path, and logs every command it runs
to the file named by $PREAMBLE_REPL_LOG, so a test can see what was re-sent.
"""

import json
import os
import sys


def message(severity, line, column, text):
    return {
        "severity": severity,
        "pos": {"line": line, "column": column},
        "endPos": {"line": line, "column": column + 3},
        "data": text,
    }


def answer(request, env):
    if "path" in request:
        return {
            "message": f"no such file or directory (error code: 2)\n  file: {request['path']}"
        }, env
    cmd = request.get("cmd", "")
    log = os.environ.get("PREAMBLE_REPL_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps(cmd) + "\n")
    if cmd == "#eval Lean.versionString":
        return {"env": env, "messages": [message("info", 1, 0, '"4.19.0"')]}, env + 1
    messages = []
    for number, line in enumerate(cmd.split("\n"), 1):
        if line.startswith("import Nope"):
            messages.append(message("error", number, 0, "unknown module prefix 'Nope'"))
        elif line.startswith("open Bad"):
            messages.append(message("error", number, 5, f"unknown namespace '{line.split()[1]}'"))
        elif line.startswith("set_option linter.warnme"):
            messages.append(message("warning", number, 11, "warnme is deprecated"))
    out = {"env": env}
    if messages:
        out["messages"] = messages
    return out, env + 1


def main():
    env = 0
    buffer = ""
    for line in sys.stdin:
        if line.strip():
            buffer += line
            continue
        if not buffer:
            continue
        request = json.loads(buffer)
        buffer = ""
        response, env = answer(request, env)
        sys.stdout.write(json.dumps(response) + "\n\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
