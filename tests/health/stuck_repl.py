"""A REPL (the stand-in) that will not stop: it ignores SIGTERM and, at the
end of its input, keeps running with stdout open. Only SIGKILL ends it."""

import signal
import time

from leanrpc.standin.__main__ import parse_args, serve

signal.signal(signal.SIGTERM, signal.SIG_IGN)
serve(parse_args(["--no-replay"]))
while True:
    time.sleep(3600)
