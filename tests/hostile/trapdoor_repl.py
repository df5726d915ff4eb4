"""A hostile REPL made from the honest stand-in: it relays every request to a
`python -m leanrpc.standin` child and every answer back, except where a mode
(argv) says to misbehave, as a REPL running a snippet's code could.

Run as `python trapdoor_repl.py MODE... [-- STANDIN-ARGS...]`. Modes:

  fifo-pickles   on a proof-state `pickleTo`, replace the file the stand-in
                 wrote by a FIFO with no writer and answer as it did (a server
                 that opens the path blocking on its event loop freezes)
  foreign-state  answer every tactic with proofState 4242, a state the REPL
                 never allocated (as if it were another client's)
  poison-on-trap after honestly answering a command containing `TRAPDOOR`,
                 write a second, forged frame before the fence's answer (the
                 worker is poisoned on the command *after* it produced entries
                 for the snippets sent before)
  lie-after-trap once a command containing `TRAPDOOR` arrived (code that got
                 past the policy), strip every error from later command answers:
                 wrong proofs, every client's, come back clean (issue 43 item 5)
  lie-after=N    the same from the N-th command on, with no trigger
  stall-after-trap=S:N
                 after answering a command containing `TRAPDOOR`, hold the
                 N-th command that follows it (fences and other requests
                 without `cmd` not counted) S seconds before relaying it: a
                 thread the trap left behind parking the REPL's main loop, so
                 a later command, whoever's, gets no answer in time
  gate=PATH      hold a command containing `GATE` until PATH exists (a test holds
                 the worker busy with it while it queues the jobs it wants grouped)
  log=PATH       append one line per misdeed to PATH (the test's proof that
                 it happened), always before the misdeed's bytes are written:
                 a server that catches it kills this process at once
"""

import json
import os
import re
import subprocess
import sys
import time

args = sys.argv[1:]
modes = set(args[: args.index("--")] if "--" in args else args)
LOG = next((m[4:] for m in modes if m.startswith("log=")), "")
standin_args = args[args.index("--") + 1 :] if "--" in args else []
LIE_AFTER = next((int(m[10:]) for m in modes if m.startswith("lie-after=")), None)
STALL = next((m[17:] for m in modes if m.startswith("stall-after-trap=")), None)
STALL_S, STALL_AT = (float(STALL.split(":")[0]), int(STALL.split(":")[1])) if STALL else (0.0, 0)
GATE = next((m[5:] for m in modes if m.startswith("gate=")), "")
lying = False
commands = 0
stall_in = 0  # commands until the armed stall (0: none armed)

child = subprocess.Popen(
    [sys.executable, "-m", "leanrpc.standin", *standin_args],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
)


def read_request():
    lines = []
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        if line.strip() == b"" and lines:
            return b"".join(lines)
        if line.strip():
            lines.append(line)


def read_answer():
    """One frame of the stand-in: bytes up to and including the blank line."""
    frame = b""
    while not frame.endswith(b"}\n\n"):
        line = child.stdout.readline()
        if not line:
            sys.exit(1)
        frame += line
    return frame


def note(what):
    if LOG:
        with open(LOG, "a") as f:
            f.write(what + "\n")


def write(data):
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


while True:
    raw = read_request()
    if raw is None:
        break
    request = json.loads(raw)
    trapped = "TRAPDOOR" in request.get("cmd", "")  # a command holding the trap's word
    if stall_in and "cmd" in request:
        stall_in -= 1
        if stall_in == 0:
            note(f"stalled {request['cmd'][:40]!r}")
            time.sleep(STALL_S)
    if GATE and "GATE" in request.get("cmd", ""):
        note("gate waiting")
        while not os.path.exists(GATE):
            time.sleep(0.01)
        note("gate opened")
    child.stdin.write(raw.rstrip(b"\n") + b"\n\n")
    child.stdin.flush()
    answer = read_answer()
    if "fifo-pickles" in modes and "pickleTo" in request and "proofState" in request:
        path = request["pickleTo"]
        try:
            os.unlink(path)
        except OSError:
            pass
        os.mkfifo(path, 0o600)
        note(f"fifo {path}")
    if "foreign-state" in modes and "tactic" in request:
        decoded = json.loads(answer)
        if "proofState" in decoded:
            decoded["proofState"] = 4242
            answer = json.dumps(decoded).encode() + b"\n\n"
            note("foreign state")
    if "cmd" in request:
        commands += 1
        if lying:
            decoded = json.loads(answer)
            errors = [m for m in decoded.get("messages", []) if m.get("severity") == "error"]
            for m in decoded.get("messages", []):  # and the sorryAx an error leaves behind
                m["data"] = re.sub(r"(, )?sorryAx(, )?", lambda g: g[1] and g[2] or "", m["data"])
            if errors:
                decoded["messages"] = [m for m in decoded["messages"] if m not in errors]
                note(f"stripped {len(errors)} errors")
            answer = json.dumps(decoded).encode() + b"\n\n"
        if "lie-after-trap" in modes and trapped:
            lying = True
            note("trap sprung")
        if LIE_AFTER is not None and commands >= LIE_AFTER:
            lying = True
        if STALL and trapped:
            stall_in = STALL_AT
            note("stall armed")
    forge = "poison-on-trap" in modes and trapped
    if forge:  # noted first: the server kills this process as soon as it reads the frame
        note("forged frame")
    write(answer)
    if forge:
        write(json.dumps({"env": 999}).encode() + b"\n\n")
