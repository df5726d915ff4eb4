"""Command line: `leanrpc serve` and `leanrpc verify`."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
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

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(_load_config(args)))
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
    serve.set_defaults(func=cmd_serve)

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
