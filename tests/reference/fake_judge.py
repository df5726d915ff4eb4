"""A stand-in external judge for tests (not comparator, not SafeVerify).

Reads {"reference", "submission"} as JSON on stdin, like a real judge
wrapper. The mode comes from argv[1]: `accept`, `refuse`, `hang`, `grep`
(refuses a submission containing the word "helper": a judge stricter than the
REPL-side check, so a test can tell the judge's word from the pin's), or
`jailed` (accepts only from inside the workers' sandbox: the host file named
on the submission's `-- marker: PATH` line is not there, the
`LEANRPC_JUDGE_CANARY` variable of the server's environment is not either,
its file-size limit is the `-- fsize: BYTES` line's, and it has a network
namespace with no way out; it prints what it saw).
"""

import json
import os
import re
import resource
import socket
import sys
import time

mode = sys.argv[1]
request = json.loads(sys.stdin.read())
assert request["reference"] and request["submission"]
assert isinstance(request["theorems"], list) and isinstance(request["definitions"], list)
if mode == "accept":
    print("fake judge: accepted")
elif mode == "refuse":
    print("fake judge: refused: declarations differ")
    sys.exit(3)
elif mode == "hang":
    time.sleep(3600)
elif mode == "jailed":
    submission = request["submission"]
    marker = re.search(r"-- marker: (\S+)", submission).group(1)
    fsize = int(re.search(r"-- fsize: (\d+)", submission).group(1))
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2).close()
        network = "reachable"
    except OSError as exc:
        network = f"unreachable ({exc.__class__.__name__})"
    seen = {
        "host file": os.path.exists(marker),
        "canary": "LEANRPC_JUDGE_CANARY" in os.environ,
        "fsize": resource.getrlimit(resource.RLIMIT_FSIZE)[0],
        "network": network,
        "judge env": os.environ.get("LEANRPC_JUDGE"),
    }
    print(f"fake judge saw: {seen}")
    jailed = (
        not seen["host file"]
        and not seen["canary"]
        and seen["fsize"] == fsize
        and seen["network"] != "reachable"
        and seen["judge env"] == "1"
    )
    sys.exit(0 if jailed else 4)
elif mode == "names":  # prints the names it was given, and accepts
    print(f"fake judge: theorems={request['theorems']} definitions={request['definitions']}")
elif mode == "grep":
    if "helper" in request["submission"]:
        print("fake judge: refused: helper")
        sys.exit(1)
    print("fake judge: accepted")
