"""`leanrpc serve`: load and check the config, set up logging, run the server.

Owns: the serve flags and how they override the config (found by
commands.configref), and that no two doors share a port. May import: app, config,
logsetup, commands.configref, commands.argtypes, commands.exits.

The event loop (`[server] event_loop`): "auto", the default, is uvloop where it
is installed (a dependency of the server on every platform it builds for)
and asyncio's otherwise; "asyncio" and "uvloop" pick one. uvloop became
possible once the launcher made the REPL's pipes itself (worker/pipes.py):
libuv's own subprocess pipes are socketpairs, whose two ends have two
inodes, and the fence audit names the REPL's channel by the inode a pipe's
ends share. Why it is the default now (issue 38 item 6, benchmarks/RESULTS.md):
measured side by side on the landed main, it takes about 9-13% less server
CPU per snippet in GRPO-shaped batches and 5-15% less for one snippet per call
or a stream, at the same throughput and the same idle cost; on issue 28's
older server (more event-loop work per request) the two were equal within the
noise. What it costs: libuv's
timers and `loop.time()` have millisecond resolution, so the audit's
sub-millisecond settle pauses become immediate re-polls (more /proc reads per
exchange, counted in the figures above), and the channel stamps each answer
of a pipelined group with `time.monotonic()`, not the loop's cached clock, so a
body's reported time keeps its resolution. Both loops stay tested: tests/hostile
runs its async tests on both, in-process servers run on asyncio's, and
`leanrpc serve` in a child process on "auto".

The cycle collector (`_settle_collector`): its youngest generation is collected
every 10,000 net allocations, not 700 (issue 38 item 6). Most of a request's
objects are freed by their reference counts before any collection, but a
group's objects alive at once crossed 700 again and again: over 2,400 snippets
in groups of 16 the server ran 76 collections (one full) for 59 ms, about 25 us
per snippet, and 2 for 7 ms at 10,000 (benchmarks/RESULTS.md). What a cycle
holds waits for the next collection, as before, only over more allocations. No
`gc.freeze()`: a frozen object is never collected, and the workers built at
start-up (cycles of callbacks) are retired later. Only this command: a process
that embeds the server (app.serve) keeps its own collector settings.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal

from ..config import Config
from . import argtypes
from .configref import load
from .exits import EXIT_INTERRUPTED, EXIT_OK, UserError
from .showconfig import CONFIG_HELP


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "serve",
        help="run the server (default REPL: the embedded stand-in)",
        description="Run the leanrpc gRPC server until SIGINT/SIGTERM. Flags override the config file.",
    )
    parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    parser.add_argument(
        "--host",
        type=argtypes.nonempty,
        help="address to listen on (default: 127.0.0.1; other hosts need auth tokens)",
    )
    parser.add_argument(
        "--port", type=argtypes.port, help="TCP port, 0 = any free port (default: 50051)"
    )
    parser.add_argument(
        "--workers", type=int, metavar="N", help="REPL worker processes (default: usable CPU cores)"
    )
    parser.add_argument(
        "--repl-cmd",
        metavar="CMD",
        type=argtypes.command_line,
        help='REPL command line, e.g. "lake env repl" (default: the stand-in)',
    )
    parser.add_argument(
        "--metrics-port",
        type=argtypes.port,
        metavar="PORT",
        help="serve Prometheus metrics on this TCP port at /metrics (default: 0 = off)",
    )
    parser.add_argument(
        "--http-port",
        type=argtypes.port,
        metavar="PORT",
        help="serve Kimina's REST API (/api/check, /verify, /health) on this TCP port (default: 0 = off)",
    )
    parser.add_argument(
        "--mcp-port",
        type=int,
        metavar="PORT",
        help="serve MCP for agents (streamable HTTP at [mcp] path, /mcp) on this TCP port (default: 0 = off)",
    )
    parser.add_argument(
        "--log-json",
        action="store_true",
        help="one JSON object per log line, and JSON status lines on stdout (default: plain lines)",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="log threshold (default: [server] log_level, info)",
    )
    return parser


def load_config(args) -> Config:
    """The config found (--config or the search path), the environment's
    LEANRPC_<SECTION>__<KEY> keys, then the flags; validated."""
    config, _path = load(args.config)
    if args.host is not None:
        config.server.host = args.host
    if args.port is not None:
        config.server.port = args.port
    if args.workers is not None:
        config.pool.workers = args.workers
    if args.repl_cmd is not None:
        config.repl.command = args.repl_cmd
    if args.metrics_port is not None:
        config.server.metrics_port = args.metrics_port
    if args.http_port is not None:
        config.gateway.http_port = args.http_port
    if args.mcp_port is not None:
        config.mcp.port = args.mcp_port
    if args.log_json:
        config.server.log_json = True
    if args.log_level:
        config.server.log_level = args.log_level
    config = config.validated()
    _check_doors_apart(config)
    return config


# Each door's port: its config key and its flag.
_DOORS = (
    ("server.port", "--port"),
    ("server.metrics_port", "--metrics-port"),
    ("gateway.http_port", "--http-port"),
    ("mcp.port", "--mcp-port"),
)


def _check_doors_apart(config: Config) -> None:
    """Two doors on one port would fail half-started; refuse it in one line."""
    gateway_host = config.gateway.host or config.server.host
    ports = {
        "server.port": (config.server.host, config.server.port),
        "server.metrics_port": (config.server.host, config.server.metrics_port),
        "gateway.http_port": (gateway_host, config.gateway.http_port),
        "mcp.port": (config.mcp.host or config.server.host, config.mcp.port),
    }
    seen: dict[tuple[str, int], tuple[str, str]] = {}
    for key, flag in _DOORS:
        address = ports[key]
        if address[1] == 0:  # off, or any free port
            continue
        if address in seen:
            other_key, other_flag = seen[address]
            raise UserError(
                f"{other_key} and {key} are both port {address[1]}; "
                "each door needs a port of its own "
                f"(change {other_flag} or {flag})"
            )
        seen[address] = (key, flag)


def run(args) -> int:
    from ..app import serve
    from ..logsetup import configure_logging

    config = load_config(args)
    configure_logging(json_lines=config.server.log_json, level=config.server.log_level.upper())
    _settle_collector()
    with asyncio.Runner(loop_factory=loop_factory(config.server.event_loop)) as runner:
        stopped_by = runner.run(serve(config))
    # Ctrl-C is "interrupted" (130, as for every command); SIGTERM is a service's normal stop.
    return EXIT_INTERRUPTED if stopped_by == signal.SIGINT else EXIT_OK


# Net allocations between two collections of the cycle collector's youngest generation
# (CPython's default is 700; the module docstring says why).
_GC_YOUNG = 10_000


def _settle_collector() -> None:
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(_GC_YOUNG, middle, old)


def loop_factory(choice: str):
    """The event loop factory for `[server] event_loop`: None is asyncio's default;
    "auto" is uvloop's where it can be imported."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "auto":
            return None
        raise UserError(
            'server.event_loop = "uvloop" but uvloop is not installed '
            '(pip install uvloop, or set it to "asyncio" or "auto")'
        ) from None
    return uvloop.new_event_loop
