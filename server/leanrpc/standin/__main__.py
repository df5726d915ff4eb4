"""Command line of the REPL stand-in (``leanrpc-repl-standin``).

Every option can also be set with an environment variable
``LEANRPC_STANDIN_<NAME>`` (upper case, dashes as underscores; booleans take
``1``/``true``/``yes``); a flag on the command line wins.
"""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__
from . import faults
from .repl import Options, Repl
from .wire import Fatal, read_request

_ENV = "LEANRPC_STANDIN_"


def _env(name: str, default=None):
    return os.environ.get(_ENV + name.upper().replace("-", "_"), default)


def _env_bool(name: str) -> bool:
    return (_env(name, "") or "").strip().lower() in ("1", "true", "yes", "on")


def _env_float(name: str, default: float) -> float:
    v = _env(name)
    try:
        return float(v) if v not in (None, "") else default
    except ValueError:
        return default


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(
        prog="leanrpc-repl-standin",
        description="Protocol-faithful stand-in for the Lean 4 REPL (leanprover-community/repl). Not Lean.",
    )
    p.add_argument("--version", action="store_true", help="print the stand-in's version and exit")
    p.add_argument(
        "--fixtures",
        default=_env("fixtures"),
        help="fixtures root for replay (default: a shared/fixtures above the cwd or the package)",
    )
    p.add_argument(
        "--no-replay",
        action="store_true",
        default=_env_bool("no-replay"),
        help="never replay, always answer in plausible mode",
    )
    p.add_argument(
        "--pretty",
        action="store_true",
        default=_env_bool("pretty"),
        help="Lean's width-80 multi-line JSON layout (default: one line per response)",
    )
    p.add_argument(
        "--no-flush",
        action="store_true",
        default=_env_bool("no-flush"),
        help="do not flush stdout after each response (REPL builds before v4.10)",
    )
    p.add_argument(
        "--fork",
        action="store_true",
        default=_env_bool("fork"),
        help="behave like the augustepoiroux fork: incrementality, setOptions, declarations, header cache",
    )
    p.add_argument(
        "--lean-version",
        default=_env("lean-version", "4.19.0"),
        help="Lean version to claim (#eval Lean.versionString) and prefer in replay (default 4.19.0); "
        "below 4.19.0 (without --fork) tactic answers have no proofStatus, as those REPL tags",
    )
    p.add_argument(
        "--sorry-style",
        choices=("backtick", "quote"),
        default=_env("sorry-style", "backtick"),
        help="spelling of the plausible-mode sorry warning (default backtick)",
    )
    p.add_argument(
        "--import-cost",
        type=float,
        default=_env_float("import-cost", 0.0),
        metavar="SECONDS",
        help="CPU seconds burnt by the first Mathlib header the process loads",
    )
    p.add_argument(
        "--reimport-cost",
        type=float,
        default=_env_float("reimport-cost", 0.0),
        metavar="SECONDS",
        help="CPU seconds for each later Mathlib header load (fork: only for headers not seen before)",
    )
    p.add_argument(
        "--base-memory-mb",
        type=float,
        default=_env_float("base-memory-mb", 0.0),
        metavar="MB",
        help="MiB allocated and touched when the first Mathlib header loads",
    )
    p.add_argument(
        "--header-memory-mb",
        type=float,
        default=_env_float("header-memory-mb", -1.0),
        metavar="MB",
        help="MiB allocated by each later header load (its own env next to the first; the .olean "
        "files stay shared): default a quarter of --base-memory-mb",
    )
    p.add_argument(
        "--cost-per-kchar",
        type=float,
        default=_env_float("cost-per-kchar", 0.0),
        metavar="SECONDS",
        help="CPU seconds per 1000 characters of elaborated body",
    )
    p.add_argument(
        "--replay-time-scale",
        type=float,
        default=_env_float("replay-time-scale", 0.0),
        metavar="F",
        help="burn F times the recorded `time` of a replayed Kimina proof (default 0)",
    )
    a = p.parse_args(argv)
    if a.version:
        sys.stdout.write(f"leanrpc-repl-standin {__version__}\n")
        sys.stdout.flush()
        raise SystemExit(0)
    return Options(
        lean_version=a.lean_version,
        fork=a.fork,
        pretty=a.pretty,
        flush=not a.no_flush,
        sorry_style=a.sorry_style,
        import_cost=a.import_cost,
        reimport_cost=a.reimport_cost,
        base_memory_mb=a.base_memory_mb,
        header_memory_mb=a.header_memory_mb if a.header_memory_mb >= 0 else a.base_memory_mb / 4,
        cost_per_kchar=a.cost_per_kchar,
        replay_time_scale=a.replay_time_scale,
        fixtures=a.fixtures if a.fixtures not in ("", "none") else None,
        replay=not a.no_replay and a.fixtures != "none",
    )


def _loader(opts: Options):
    def load():
        from .replay import load_index

        return load_index(opts)

    return load


def serve(opts: Options, stdin=None, stdout=None, stderr=None) -> int:
    """Runs the request loop until end of input; returns the exit status."""
    stdin = stdin or sys.stdin.buffer
    if stdout is None:
        if opts.flush:
            stdout = sys.stdout.buffer
        else:
            # Our own block buffer, so that PYTHONUNBUFFERED cannot undo the
            # pre-v4.10 behaviour (glibc stdio keeps 4-8 KiB of a pipe's output).
            import io

            stdout = io.BufferedWriter(io.FileIO(sys.stdout.fileno(), "wb", closefd=False), 8192)
    stderr = stderr or sys.stderr
    repl = Repl(opts, index_loader=_loader(opts))
    repl.stdout = stdout
    readline = stdin.readline
    if opts.pretty:
        from .jsonfmt import pretty as render
    else:
        from .jsonfmt import flat as render
    flush = opts.flush
    write = stdout.write
    while True:
        raw = read_request(readline)
        if not raw:
            stdout.flush()
            return 0
        faults.begin()
        try:
            resp = repl.handle(raw.decode("utf-8", "replace"))
        except Fatal as e:
            stdout.flush()
            stderr.write("uncaught exception: " + e.text + "\n")
            stderr.flush()
            return 1
        if resp is None:
            faults.settle()
            continue
        data = (render(resp) + "\n\n").encode("utf-8", "surrogatepass")
        faults.settle()
        if repl.partial:
            write(data[: max(1, len(data) // 2)])
            stdout.flush()
            from .faults import hang

            hang(None)
        write(data)
        if flush:
            stdout.flush()


def main(argv: list[str] | None = None) -> None:
    opts = parse_args(argv)
    try:
        code = serve(opts)
    except BrokenPipeError:
        # the client went away; nothing can be reported on a closed stdout
        try:
            sys.stdout = None  # type: ignore[assignment]
        finally:
            os._exit(1)
    except KeyboardInterrupt:
        os._exit(130)
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
