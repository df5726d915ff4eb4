"""A fake REPL: the stand-in, except that a command holding `--@big:N` gets
one more info message of N bytes in its answer. Everything else is the
stand-in's answer, unchanged. Runs the stand-in in this process (the worker
sandbox does not let a REPL start children).

Run as `python big_reply_repl.py [stand-in args]`.
"""

import re

from leanrpc.standin import __main__ as standin
from leanrpc.standin.repl import Repl

_BIG = re.compile(r"--@big:(\d+)")
_plain_handle = Repl.handle


def _handle(self, text: str):
    response = _plain_handle(self, text)
    big = _BIG.search(text)
    if response is not None and big is not None:
        size = int(big.group(1))
        message = {
            "severity": "info",
            "pos": {"line": 1, "column": 0},
            "endPos": None,
            "data": "x" * size,
        }
        response["messages"] = list(response.get("messages", [])) + [message]
    return response


if __name__ == "__main__":
    Repl.handle = _handle
    standin.main()
