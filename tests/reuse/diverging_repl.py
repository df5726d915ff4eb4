"""A fake REPL that is not a faithful copy of itself: it speaks the protocol
honestly, but a command containing `DIVERGE` gets an env only the first time
any process of this kind sees it (a marker file, its path the first argument); every
later process answers it with an error and no env, as a REPL built from other
sources would. Used to show that a diverged replay kills the worker (the pool
does it, services never do) and that the call is retried, then failed."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fake_repl_loop import serve, version_messages  # noqa: E402 (tests/, put on the path above)

ENV = [0]


def answer(obj):
    cmd = obj.get("cmd", "")
    if "env" in obj and obj["env"] is not None and obj["env"] >= ENV[0]:
        return {"message": "Unknown environment."}
    if "DIVERGE" in cmd:
        mark = sys.argv[1]
        if os.path.exists(mark):
            return {"message": "Lean error:\nthis process elaborates it otherwise"}
        open(mark, "w").close()
    env, ENV[0] = ENV[0], ENV[0] + 1
    response = {"env": env}
    if "Lean.versionString" in cmd:
        response["messages"] = version_messages("4.19.0 (diverging fake)")
    return response


def main() -> None:
    serve(answer)


if __name__ == "__main__":
    main()
