"""A fake REPL: the stand-in, except that a command holding `--@big:N` (N
bytes) is answered with one info message of N bytes, and `--@many:K:N` with
K info messages of N bytes each. Everything else passes through unchanged.

Run as `python big_reply_repl.py [stand-in args]`.
"""

import json
import re
import subprocess
import sys

_BIG = re.compile(r"--@big:(\d+)")
_MANY = re.compile(r"--@many:(\d+):(\d+)")


def read_frame(stream) -> bytes | None:
    lines = []
    while True:
        line = stream.readline()
        if not line:
            return None
        if line.strip() == b"":
            if lines:
                return b"".join(lines)
            continue
        lines.append(line)


def main() -> None:
    child = subprocess.Popen([sys.executable, "-m", "leanrpc.standin", *sys.argv[1:]],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    try:
        while True:
            request = read_frame(stdin)
            if request is None:
                break
            child.stdin.write(request + b"\n")
            child.stdin.flush()
            response = read_frame(child.stdout)
            if response is None:
                break
            command = json.loads(request).get("cmd", "")
            big, many = _BIG.search(command), _MANY.search(command)
            if big or many:
                reply = json.loads(response)
                count, size = (1, int(big.group(1))) if big else (int(many.group(1)), int(many.group(2)))
                message = {"severity": "info", "pos": {"line": 1, "column": 0}, "endPos": None, "data": "x" * size}
                reply["messages"] = list(reply.get("messages", [])) + [message] * count
                response = json.dumps(reply).encode()
            stdout.write(response.rstrip(b"\n") + b"\n\n")
            stdout.flush()
    finally:
        child.stdin.close()
        child.wait()


if __name__ == "__main__":
    main()
