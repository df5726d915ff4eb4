"""A stand-in external judge for tests (not comparator, not SafeVerify).

Reads {"reference", "submission"} as JSON on stdin, like a real judge
wrapper. The mode comes from argv[1]: `accept`, `refuse`, `hang`, or `grep`
(refuses a submission containing the word "helper": a judge stricter than the
REPL-side check, so a test can tell the judge's word from the pin's).
"""

import json
import sys
import time

mode = sys.argv[1]
request = json.loads(sys.stdin.read())
assert request["reference"] and request["submission"]
if mode == "accept":
    print("fake judge: accepted")
elif mode == "refuse":
    print("fake judge: refused: declarations differ")
    sys.exit(3)
elif mode == "hang":
    time.sleep(3600)
elif mode == "grep":
    if "helper" in request["submission"]:
        print("fake judge: refused: helper")
        sys.exit(1)
    print("fake judge: accepted")
