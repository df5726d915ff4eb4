"""`leanrpc mcp`: MCP over stdio for an agent host that starts a process (docs/AGENTS.md).

With `--address` (or $LEANRPC_MCP_URL) it relays to that server's MCP door
(`serve --mcp-port`), under the token in `$LEANRPC_MCP_TOKEN` (or --token-env
NAME): the agent is that token's identity there, with its limits and states.
Without one it starts a local server itself (the config found as for `serve`:
its pool, its REPL; gRPC and the MCP door on loopback ports the OS picks),
relays to it, and stops it, workers included, when stdin ends or on
SIGTERM/SIGINT. stdout carries only MCP; logs go to stderr. May import: app,
agents (the relay), config, logsetup, commands.configref, commands.argtypes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal

from . import argtypes
from .configref import load
from .exits import UserError
from .showconfig import CONFIG_HELP

TOKEN_ENV = "LEANRPC_MCP_TOKEN"
URL_ENV = "LEANRPC_MCP_URL"


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "mcp",
        help="MCP over stdio for agents (relays to a server, or runs a local one)",
        description=(
            "Speak MCP on stdin/stdout. With --address, relay to that leanrpc server's MCP door; "
            "without, start a local server and stop it on exit."
        ),
    )
    parser.add_argument(
        "--address",
        metavar="URL",
        help=f"a server's MCP door, e.g. http://host:8765/mcp (default: ${URL_ENV}, else a local server)",
    )
    parser.add_argument(
        "--token-env",
        metavar="NAME",
        default=TOKEN_ENV,
        help=f"environment variable holding the bearer token (default: {TOKEN_ENV})",
    )
    parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    parser.add_argument(
        "--workers", type=int, metavar="N", help="local server: REPL worker processes"
    )
    parser.add_argument(
        "--repl-cmd",
        metavar="CMD",
        type=argtypes.command_line,
        help="local server: the REPL command line (default: the config's, else the stand-in)",
    )
    return parser


def run(args) -> int:
    from ..logsetup import configure_logging

    address = args.address or os.environ.get(URL_ENV, "")
    token = os.environ.get(args.token_env) or None
    if address and not address.startswith(("http://", "https://")):
        raise UserError(f"--address must be an http(s) URL of an MCP door, not {address!r}")
    config = None
    if not address:
        config, _path = load(args.config)
        if args.workers is not None:
            config.pool.workers = args.workers
        if args.repl_cmd is not None:
            config.repl.command = args.repl_cmd
        config.server.host = "127.0.0.1"
        config.server.port = 0
        config.server.metrics_port = 0
        config.gateway.http_port = 0
        config.mcp.host = ""
        config.mcp.port = 0
        config = config.validated()
        level = config.server.log_level.upper()
    else:
        level = "WARNING"
    configure_logging(json_lines=False, level=level)  # on stderr: stdout is the agent's
    for chatty in ("httpx2", "mcp"):  # a line per HTTP request of the relay: not the server's log
        logging.getLogger(chatty).setLevel(logging.WARNING)
    asyncio.run(_main(address, token, config))
    return 0


async def _main(address: str, token: str | None, config) -> None:
    try:
        from ..agents.relay import relay_stdio
    except ImportError as exc:  # the mcp extra is not installed
        raise UserError(f"leanrpc mcp needs the mcp extra (pip install 'leanrpc[mcp]'): {exc}")

    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, main.cancel)
    if address:
        try:
            await relay_stdio(address, token)
        except asyncio.CancelledError:
            pass
        return
    from ..app import create_server, start_agents_door

    app = await create_server(config)
    try:
        door = await start_agents_door(app, port=0)
        app.mcp = door  # stopped with the app
        await relay_stdio(door.url, token)
    except asyncio.CancelledError:
        pass
    finally:
        await asyncio.shield(app.stop(2.0))
