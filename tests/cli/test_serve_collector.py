"""`leanrpc serve` paces the cycle collector (commands/serve.py `_settle_collector`).

A real `leanrpc serve` runs in a child Python that prints `gc.get_threshold()` when it gets
SIGUSR2: after "listening", the youngest generation's threshold is 10,000 and the older ones
are CPython's own.
"""

from __future__ import annotations

import gc
import signal
import subprocess
import sys

from tests.cli.cli_support import clean_env

_CHILD = """
import gc, signal, sys
signal.signal(signal.SIGUSR2, lambda *_: print("threshold", *gc.get_threshold(), flush=True))
from leanrpc.commands import main
sys.exit(main(["serve", "--port", "0", "--workers", "1"]))
"""


def test_serve_collects_the_youngest_generation_every_10000_net_allocations():
    default = gc.get_threshold()
    process = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=clean_env(),
        start_new_session=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("leanrpc listening on "), line
        process.send_signal(signal.SIGUSR2)
        line = process.stdout.readline()
        assert line.split() == ["threshold", "10000", str(default[1]), str(default[2])], line
    finally:
        process.terminate()
        process.communicate(timeout=60)
