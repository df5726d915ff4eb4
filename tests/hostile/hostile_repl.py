"""A hostile fake REPL: speaks the protocol, and misbehaves on directives.

Run as `python hostile_repl.py`. Requests are read like the real REPL
(lines up to a blank line); answers are one JSON frame each. The verdict
model is tiny: a command containing `bad` gets an error message (INVALID),
`sorry` a sorry warning, `#print axioms NAME` lines "does not depend on any
axioms", anything else is clean; every command allocates the next env id;
`{"path": …}` gets the IO error naming the path (the fence).

Directive lines `--@hostile: NAME` in a command start a thread that does what
a snippet could do inside real Lean (`IO.asTask`), after the command is
answered (the snippet itself contains `bad`, so its own honest verdict is
INVALID):

  forge-self    write a forged VALID frame for this very command, before the
                honest answer
  forge-next    when the next request arrives, write a forged VALID frame for it
  forge-after   after the next command's honest answer, write a forged VALID
                frame (between the answer and the fence's answer)
  forge-idle    write a forged VALID frame while the REPL is idle
  garbage-idle  write non-JSON bytes while idle
  dup-stdout    keep a copy of stdout, point fd 1 at /dev/null, and answer
                every later request itself (it sees what the main loop reads,
                nonce included) through the copy
  steal         read the REPL's stdin in a thread and answer what it takes
                (fence included, right nonce, right env guess), staying
                blocked in read between thefts
  steal-evasive like steal, but park the main thread in a signal handler so
                the theft always wins, and sleep (not read) between thefts so
                no thread but the main one is seen reading
  threads=N     leave N sleeping threads behind

One directive changes the answer itself rather than starting a thread:

  mute-after    `#print axioms` lines after the directive's line get no answer
                (a check the body's own syntax took in, so Lean answered none)
"""

import json
import os
import re
import signal
import sys
import threading
import time

STATE = {"env": 0, "requests": 0, "answered": 0, "racers": 0}
LOCK = threading.Lock()
NEW_REQUEST = threading.Condition(LOCK)
_DIRECTIVE = re.compile(r"--@hostile:\s*([\w-]+)(?:=(\S+))?")
REQUESTS = []  # every request the main loop read, in order


def write_frame(obj, fd=1):
    os.write(fd, json.dumps(obj, ensure_ascii=False).encode() + b"\n\n")


def answer(obj):
    """The honest answer to one request (the main loop's view)."""
    if "path" in obj:
        return {"message": f"no such file or directory (error code: 2)\n  file: {obj['path']}"}
    if "cmd" not in obj:
        return {"message": "Lean error:\nunsupported in the hostile fake"}
    cmd = obj["cmd"]
    if "env" in obj and obj["env"] is not None and obj["env"] >= STATE["env"]:
        return {"message": "Unknown environment."}
    with LOCK:
        env = STATE["env"]
        STATE["env"] += 1
    messages = []
    if "Lean.versionString" in cmd:
        messages.append(
            {
                "severity": "info",
                "pos": {"line": 1, "column": 0},
                "endPos": {"line": 1, "column": 5},
                "data": '"4.33.0-rc2 (hostile fake)"',
            }
        )
    mute = re.search(r"^--@hostile: mute-after$", cmd, re.M)
    for found in re.finditer(r"^#print axioms (\S+)", cmd, re.M):
        if mute is not None and found.start() > mute.start():
            continue  # a check this REPL never answers (body syntax took it in)
        line = cmd.count("\n", 0, found.start()) + 1  # placed where Lean places it
        messages.append(
            {
                "severity": "info",
                "pos": {"line": line, "column": 0},
                "endPos": {"line": line, "column": 6},
                "data": f"'{found[1].removeprefix('_root_.')}' does not depend on any axioms",
            }
        )
    if "bad" in cmd:
        messages.append(
            {
                "severity": "error",
                "pos": {"line": 1, "column": 0},
                "endPos": {"line": 1, "column": 3},
                "data": "type mismatch (hostile fake)",
            }
        )
    elif "sorry" in cmd:
        messages.append(
            {
                "severity": "warning",
                "pos": {"line": 1, "column": 8},
                "endPos": {"line": 1, "column": 9},
                "data": "declaration uses `sorry`",
            }
        )
    response = {"env": env}
    if messages:
        response["messages"] = messages
    return response


def forged(obj):
    """What a forger writes: a clean VALID answer for a command, or the right
    fence answer (it knows the nonce when it saw the request)."""
    if "path" in obj:
        return answer(obj)
    with LOCK:
        env = STATE["env"]
        STATE["env"] += 1  # the forger keeps the counter in step, as it could
    return {"env": env}


def wait_requests(target):
    with NEW_REQUEST:
        while STATE["requests"] < target:
            NEW_REQUEST.wait()


def wait_answered(target):
    while STATE["answered"] < target:
        time.sleep(0.0002)


def start(target, *args):
    threading.Thread(target=target, args=args, daemon=True).start()


def forge_self():
    write_frame({"env": STATE["env"]})


# Thread bodies get (R, A): requests read and answered when the directive's
# command was answered. Its fence is request R+1; the next command is R+2.
def forge_next(r, a):
    STATE["racers"] += 1
    wait_requests(r + 2)
    write_frame({"env": STATE["env"]})


def forge_after(r, a):
    STATE["racers"] += 1
    wait_answered(a + 2)
    write_frame({"env": STATE["env"]})


def forge_idle(r, a):
    time.sleep(0.005)
    write_frame({"env": STATE["env"]})


def garbage_idle(r, a):
    time.sleep(0.005)
    os.write(1, b"@@ not json @@\n\n")


def dup_stdout(r, a):
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    wait_answered(a + 1)  # let this command's fence be answered honestly first
    os.dup2(null, 1)
    index = r + 1
    while True:
        wait_requests(index + 1)
        write_frame(forged(json.loads(REQUESTS[index])), saved)
        index += 1


def _answer_stolen(data):
    for block in data.split(b"\n\n"):
        if block.strip():
            write_frame(forged(json.loads(block)))


def steal(r, a):
    while True:
        data = os.read(0, 1 << 16)
        if not data:
            return
        _answer_stolen(data)


def _park_main(_signum, _frame):
    time.sleep(0.3)


def steal_evasive(r, a):
    wait_answered(a + 1)
    time.sleep(0.05)
    while True:
        signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
        time.sleep(0.001)
        data = os.read(0, 1 << 16)  # the main thread is parked in the handler: we win
        if not data:
            return
        _answer_stolen(data)
        # Asleep, not reading, while the server audits; the main thread is
        # back at its read by then, as if nothing happened.
        time.sleep(0.6)


def sleeper():
    while True:
        time.sleep(3600)


ACTIONS = {
    "forge-self": forge_self,
    "forge-next": forge_next,
    "forge-after": forge_after,
    "forge-idle": forge_idle,
    "garbage-idle": garbage_idle,
    "dup-stdout": dup_stdout,
    "steal": steal,
    "steal-evasive": steal_evasive,
}


def run_directives(cmd):
    marks = (STATE["requests"], STATE["answered"])
    for name, arg in _DIRECTIVE.findall(cmd):
        if name == "threads":
            for _ in range(int(arg or 1)):
                start(sleeper)
        elif name == "steal-evasive":
            signal.signal(signal.SIGUSR1, _park_main)
            start(steal_evasive, *marks)
        elif name in ACTIONS and name != "forge-self":
            start(ACTIONS[name], *marks)


def read_request(stdin):
    lines = []
    while True:
        line = stdin.readline()
        if not line:
            return b"".join(lines) if lines else None
        if not line.strip():
            if lines:
                return b"".join(lines)
            continue
        lines.append(line.rstrip())


def main():
    stdin = sys.stdin.buffer
    while True:
        text = read_request(stdin)
        if text is None:
            return
        obj = json.loads(text)
        with NEW_REQUEST:
            REQUESTS.append(text)
            STATE["requests"] += 1
            NEW_REQUEST.notify_all()
        if STATE["racers"]:
            time.sleep(0.002)  # let a forging thread act inside this exchange
        cmd = obj.get("cmd", "") if isinstance(obj, dict) else ""
        if "--@hostile: forge-self" in cmd:
            forge_self()
        write_frame(answer(obj))
        STATE["answered"] += 1
        if STATE["racers"]:
            time.sleep(0.002)
        if cmd:
            run_directives(cmd)


if __name__ == "__main__":
    main()
