"""The read-answer loop of the small fake REPLs the tests run as processes:
requests are JSON objects ended by a blank line (as the real REPL reads them),
each answered with one JSON frame. Stdlib only: the fakes import it by path."""

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
            os.write(1, json.dumps(answer(obj)).encode() + b"\n\n")
