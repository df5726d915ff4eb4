"""Command line: `leanrpc serve` and `leanrpc verify`."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
from pathlib import Path

from .config import Config


def _load_config(args) -> Config:
    config = Config.from_toml(args.config) if getattr(args, "config", None) else Config()
    if getattr(args, "host", None):
        config.server.host = args.host
    if getattr(args, "port", None) is not None:
        config.server.port = args.port
    if getattr(args, "workers", None):
        config.pool.workers = args.workers
    if getattr(args, "repl_cmd", None):
        config.repl.command = shlex.split(args.repl_cmd)
    return config


def cmd_serve(args) -> int:
    from .edge.server import serve
    from .ops.logging import configure_logging

    config = _load_config(args)
    if getattr(args, "metrics_port", None) is not None:
        config.server.metrics_port = args.metrics_port
    if getattr(args, "http_port", None) is not None:
        config.gateway.http_port = args.http_port
    configure_logging(json_lines=config.server.log_json or bool(getattr(args, "log_json", False)))
    asyncio.run(serve(config))
    return 0


def _lean_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(path.rglob("*.lean")))
        else:
            files.append(path)
    return files


def cmd_verify(args) -> int:
    from .client import Client, ClientError

    files = _lean_files(args.paths)
    if not files:
        print("no .lean files given", file=sys.stderr)
        return 2
    snippets = [(str(f), f.read_text(encoding="utf-8")) for f in files]
    try:
        with Client(args.server, token=args.token) as client:
            results = client.verify(snippets, timeout_s=args.timeout, progress=not args.json)
    except ClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bad = 0
    for result in results:
        if not result.valid:
            bad += 1
        if args.json:
            print(json.dumps(result.to_dict(), ensure_ascii=False))
        else:
            print(f"{result.status:<14} {result.id}  ({result.verifier})")
            for message in result.messages:
                if message.severity == "ERROR" or result.status != "VALID":
                    print(f"    {result.id}:{message.line}:{message.column}: {message.severity.lower()}: {message.text}")
            if result.error:
                print(f"    {result.error.splitlines()[0]}")
    if not args.json:
        print(f"{len(results) - bad} of {len(results)} valid")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="leanrpc", description="gRPC verification service for Lean 4")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the server (default REPL: the embedded stand-in)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int)
    serve.add_argument("--repl-cmd", help='REPL command line, e.g. "lake env repl"')
    serve.add_argument("--config", help="TOML configuration file")
    serve.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port (/metrics)")
    serve.add_argument("--http-port", type=int, help="serve Kimina's REST API (/api/check, /verify) on this port")
    serve.add_argument("--log-json", action="store_true", help="one JSON object per log line")
    serve.set_defaults(func=cmd_serve)

    setup = sub.add_parser("setup", help="install a real Lean toolchain, project and REPL; write a config")
    setup.add_argument("--lean", required=True, metavar="VERSION", help="Lean release, e.g. v4.19.0")
    setup.add_argument("--mathlib", action="store_true", help="a project that depends on Mathlib (+ cache get)")
    setup.add_argument("--project", help="use this lake project instead of creating one")
    setup.add_argument("--workdir", help="where the project and REPL go (default ~/.leanrpc/lean-VERSION)")
    setup.add_argument("--repl", choices=["upstream", "fork"], default="upstream",
                       help="leanprover-community/repl or the augustepoiroux/repl incrementality fork")
    setup.add_argument("--repl-rev", help="REPL git revision (default: the Lean version tag)")
    setup.add_argument("--output", help="config file to write (default WORKDIR/leanrpc.toml)")
    setup.add_argument("--workers", type=int, help="pool size to write into the config")
    setup.add_argument("--via-lake", action="store_true",
                       help="REPL command `lake env repl` (the sandbox then allows spawning) instead of "
                            "the REPL binary with lake's environment")
    setup.add_argument("--dry-run", action="store_true", help="print the steps; run nothing")
    setup.set_defaults(func=lambda a: __import__("leanrpc.ops.setup_lean", fromlist=["main_setup"]).main_setup(a))

    doctor = sub.add_parser("doctor", help="check the configured REPL: versions, handshake, import time and memory")
    doctor.add_argument("--config", help="TOML configuration file (default: the embedded stand-in)")
    doctor.add_argument("--repl-cmd", help="REPL command line instead of the config's")
    doctor.add_argument("--header", help='header to time (default "import Mathlib" for Mathlib projects)')
    doctor.add_argument("--require-lean", action="store_true", help="fail when the REPL is the stand-in")
    doctor.set_defaults(func=lambda a: __import__("leanrpc.ops.doctor", fromlist=["main_doctor"]).main_doctor(a))

    verify = sub.add_parser("verify", help="verify .lean files through a running server")
    verify.add_argument("paths", nargs="+")
    verify.add_argument("--server", default="127.0.0.1:50051")
    verify.add_argument("--token")
    verify.add_argument("--timeout", type=float, default=0.0)
    verify.add_argument("--json", action="store_true", help="one JSON result per line")
    verify.set_defaults(func=cmd_verify)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
