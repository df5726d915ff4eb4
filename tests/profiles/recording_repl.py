"""The stand-in REPL, also appending every request it reads to the file
named by $LEANRPC_RECORD (one JSON request per line), so a test can see what
the server sent each profile's REPL (incrementality, setOptions).

Usage: python recording_repl.py [stand-in flags...]
"""

from __future__ import annotations

import os
import sys

from leanrpc.standin.__main__ import parse_args, serve


class _Recording:
    def __init__(self, stream, path: str) -> None:
        self._stream = stream
        self._path = path

    def readline(self) -> bytes:
        line = self._stream.readline()
        if line.strip():
            with open(self._path, "ab") as out:
                out.write(line if line.endswith(b"\n") else line + b"\n")
        return line


def main() -> None:
    opts = parse_args(sys.argv[1:])
    code = serve(opts, stdin=_Recording(sys.stdin.buffer, os.environ["LEANRPC_RECORD"]))
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
