"""The read-answer loop of the small fake REPLs the tests run as processes:
requests are JSON objects ended by a blank line (as the real REPL reads them),
each answered with one JSON frame. A file request (the server's fence) gets the
IO error a real REPL gives for a path that does not exist, so a fake's
`answer` sees only commands and tactics. Stdlib only: the fakes import it by path."""

import json
import os
import sys


def serve(answer) -> None:
    """Answers every request on stdin with `answer(request)` until EOF."""
    stdin = sys.stdin.buffer
    lines = []
    while True:
        line = stdin.readline()
        if not line:
            return
        if line.strip():
            lines.append(line)
            continue
        if lines:
            obj = json.loads(b"".join(lines))
            lines = []
            reply = fence_answer(obj) if "path" in obj else answer(obj)
            os.write(1, json.dumps(reply).encode() + b"\n\n")


def fence_answer(obj: dict) -> dict:
    return {"message": f"no such file or directory (error code: 2)\n  file: {obj['path']}"}


def version_messages(label: str) -> list[dict]:
    """The info message that answers the server's `#eval Lean.versionString` probe."""
    return [
        {
            "severity": "info",
            "pos": {"line": 1, "column": 0},
            "endPos": {"line": 1, "column": 5},
            "data": f'"{label}"',
        }
    ]
