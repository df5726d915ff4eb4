"""A fake REPL that is not a faithful copy of itself: it speaks the protocol
honestly, but a command containing `DIVERGE` gets an env only the first time
any process of this kind sees it (a marker file, its path the first argument); every
later process answers it with an error and no env, as a REPL built from other
sources would. Used to show that a diverged replay kills the worker (the pool
does it, services never do) and that the call is retried, then failed."""

import json
import os
import sys

ENV = [0]


def answer(obj):
    if "path" in obj:  # the fence
        return {"message": f"no such file or directory (error code: 2)\n  file: {obj['path']}"}
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
        response["messages"] = [{"severity": "info", "pos": {"line": 1, "column": 0},
                                 "endPos": {"line": 1, "column": 5}, "data": '"4.19.0 (diverging fake)"'}]
    return response


def main() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from fake_repl_loop import serve

    serve(answer)


if __name__ == "__main__":
    main()
