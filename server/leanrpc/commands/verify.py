"""`leanrpc verify`: send .lean files to a running server, print the verdicts.

Owns: the flags, the address rule (`HOST` means port 50051), the call to
the server, what a failed call says, and the exit status. Inputs (paths,
references, the token) are verify_input's, output (result lines, summary)
verify_output's. May import: the client, config.sections (the largest time limit), commands.argtypes, commands.exits,
commands.verify_input, commands.verify_output.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

import msgspec

from ..config.sections import PoolConfig
from . import argtypes
from .exits import EXIT_INTERRUPTED, EXIT_NOT_VALID, EXIT_OK, EXIT_USAGE, UserError
from .verify_input import STDIN, TOKEN_ENV, collect, references_for, token_of
from .verify_output import Printer, summary

DEFAULT_PORT = 50051
# The server's largest time limit, as the config schema states it.
MAX_TIMEOUT_S: float = next(
    f.default for f in msgspec.structs.fields(PoolConfig) if f.name == "max_timeout_s"
)


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "verify",
        help="verify .lean files through a running server",
        description="Verify .lean files (folders are searched recursively) on a running `leanrpc serve`.",
    )
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help=".lean files, folders, - (stdin), or JSON records (.jsonl, .json) with --field",
    )
    parser.add_argument(
        "--server",
        default=f"127.0.0.1:{DEFAULT_PORT}",
        metavar="HOST[:PORT]",
        type=_address_arg,
        help=f"server address; without a port, {DEFAULT_PORT} (default: 127.0.0.1:{DEFAULT_PORT})",
    )
    token = parser.add_mutually_exclusive_group()
    token.add_argument(
        "--token",
        type=argtypes.nonempty,
        help="bearer token, when the server requires one; a secret on the command line is "
        f"visible to other users: prefer --token-file or ${TOKEN_ENV} (default: ${TOKEN_ENV})",
    )
    token.add_argument(
        "--token-file",
        metavar="FILE",
        type=argtypes.existing_file,
        help="read the bearer token from FILE (its first line) (default: none)",
    )
    parser.add_argument(
        "--timeout",
        type=_timeout_arg,
        default=0.0,
        metavar="SECONDS",
        help="per-file time limit in seconds, 0 = the server's default, at most "
        f"{MAX_TIMEOUT_S:g} (the default of the server's [pool] max_timeout_s) (default: 0)",
    )
    parser.add_argument(
        "--retries",
        type=argtypes.count,
        default=3,
        metavar="N",
        help="retries when the server is unavailable or overloaded (default: 3)",
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON result per line (default: text)"
    )
    parser.add_argument(
        "--field",
        metavar="NAME",
        type=argtypes.nonempty,
        help="records (.jsonl, .json, stdin): the key holding the Lean code (default: none; "
        "a records file without it is refused)",
    )
    parser.add_argument(
        "--id-field",
        metavar="NAME",
        type=argtypes.nonempty,
        help="records: the key holding each record's id (default: FILE:LINE)",
    )
    parser.add_argument(
        "--profile",
        default="",
        metavar="NAME",
        help="the server's REPL profile (toolchain) to run on (default: the server's default)",
    )
    parser.add_argument(
        "--no-cache",
        dest="cache",
        action="store_false",
        default=None,
        help="bypass the server's result cache (default: use it)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the results (text or --json lines) to FILE instead of stdout (default: stdout)",
    )
    pin = parser.add_mutually_exclusive_group()
    pin.add_argument(
        "--reference-field",
        metavar="NAME",
        type=argtypes.nonempty,
        help="records: pin each record to the statement in this key (default: none)",
    )
    pin.add_argument(
        "--reference",
        metavar="REF.lean",
        type=argtypes.existing_file,
        help="pin every file to this statement (header + declarations proved by `sorry`) (default: none)",
    )
    pin.add_argument(
        "--reference-dir",
        metavar="DIR",
        type=argtypes.existing_folder,
        help="pin each file to DIR/<its file name>; a file without one is REJECTED (default: none)",
    )
    parser.add_argument(
        "--no-check-axioms",
        dest="check_axioms",
        action="store_false",
        default=None,
        help="turn off the server's `#print axioms` check for these files "
        "(default: the server's [axioms] check, on)",
    )
    for flag, what in (
        ("--all-tactics", "each tactic with the goals before it (`tactics`)"),
        ("--root-goals", "each tactic block's starting goal (`root_goals`)"),
        ("--declarations", "the fork REPL's declarations (`declarations_json`)"),
    ):
        parser.add_argument(
            flag,
            action="store_true",
            help=f"ask the REPL for {what}, in --json lines (default: off)",
        )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no summary table on stderr at the end (default: print it)",
    )
    return parser


def _timeout_arg(text: str) -> float:
    """0 to the server's largest time limit; a larger one is a usage error here
    rather than a REJECTED result for every file from the server."""
    value = argtypes.seconds(text)
    if value > MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(
            f"{text} s is over the server's maximum; give 0 (the server's default) "
            f"to {MAX_TIMEOUT_S:g} seconds ([pool] max_timeout_s)"
        )
    return value


def _address_arg(text: str) -> str:
    try:
        return server_address(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--server ")) from None


def server_address(text: str) -> str:
    """HOST, HOST:PORT, [V6] or [V6]:PORT; a missing port is 50051 (never 443)."""
    text = text.strip()
    for scheme in ("grpc://", "http://"):
        if text.startswith(scheme):
            text = text[len(scheme) :]
    if not text:
        raise UserError("--server is empty; give HOST or HOST:PORT")
    if text.startswith("["):
        if "]:" not in text:
            return f"{text}:{DEFAULT_PORT}"
        _check_port(text, text.rpartition("]:")[2])
        return text
    if text.count(":") > 1:  # a bare IPv6 address
        return f"[{text}]:{DEFAULT_PORT}"
    host, sep, port = text.partition(":")
    if sep:
        _check_port(text, port)
    if not host:
        raise UserError(f"--server {text!r}: the host is missing; give HOST or HOST:PORT")
    return text if sep else f"{host}:{DEFAULT_PORT}"


def _check_port(text: str, port: str) -> None:
    if not port.isdigit():
        raise UserError(f"--server {text!r}: the port must be a number")
    if not 1 <= int(port) <= 65535:
        raise UserError(f"--server {text!r}: the port must be between 1 and 65535")


def run(args) -> int:
    if not args.output:
        return _run(args)
    try:
        out = open(args.output, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise UserError(f"--output {args.output}: cannot write it ({exc.strerror})") from None
    with out, contextlib.redirect_stdout(out):  # the printer prints on the client's thread too
        return _run(args)


def _run(args) -> int:
    from ..client import Client, ClientError

    address = args.server
    if args.paths.count(STDIN) > 1:
        raise UserError("- (stdin) can be given once")
    collected = collect(args.paths, args)
    snippets, problems, order = collected.snippets, collected.problems, collected.order
    started = time.monotonic()
    if collected.references is not None:
        references, missing = collected.references, []
    else:
        references, missing = references_for(snippets, args) if snippets else (None, [])
    if missing:
        # Never verify a file unpinned when pinning was asked for.
        refused = {path for path, _reason in missing}
        problems = problems + missing
        kept = [n for n, (path, _t) in enumerate(snippets) if path not in refused]
        snippets, references = [snippets[n] for n in kept], [references[n] for n in kept]
    printer = Printer(order, problems, snippets, args.json)
    if not snippets:
        printer.stop()
        if not args.json:
            print(f"0 of {len(problems)} valid")
        summary(args, [], problems, started)
        return EXIT_NOT_VALID
    progress = sys.stderr.isatty() and not args.json
    token, token_source = token_of(args)
    try:
        if token:
            _say_if_token_unchecked(address, token_source, Client, ClientError)
        with Client(
            address, token=token, max_retries=args.retries, warn_unchecked_token=False
        ) as client:
            results = client.verify(
                snippets,
                timeout_s=args.timeout,
                progress=progress,
                on_result=printer.on_result,
                references=references,
                check_axioms=args.check_axioms,
                profile=args.profile,
                cache=args.cache,
                all_tactics=args.all_tactics,
                root_goals=args.root_goals,
                declarations=args.declarations,
            )
    except KeyboardInterrupt:  # the client's Interrupted, or Ctrl-C before the batch started
        printed = printer.stop()
        print(f"interrupted: {printed} of {len(snippets)} answered", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except ClientError as exc:
        printer.stop()
        got = (
            f" ({len(exc.partial)} of {len(snippets)} results arrived before it)"
            if exc.partial
            else ""
        )
        print(
            f"leanrpc verify: error: {_describe_failure(exc, address, token_source)}{got}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    printer.stop()
    bad = sum(not r.valid for r in results) + len(problems)
    if not args.json:
        print(
            f"{len(results) - sum(not r.valid for r in results)} of {len(results) + len(problems)} valid"
        )
    summary(args, results, problems, started)
    return EXIT_NOT_VALID if bad else EXIT_OK


def _say_if_token_unchecked(address: str, source: str, client_type, client_error) -> None:
    """--token against a server that checks no tokens: one line, not silence.
    (A tokenless GetServerInfo succeeds only there; it is guarded otherwise.)"""
    try:
        with client_type(address, max_retries=0) as probe:
            probe.server_info()
    except client_error:
        return  # tokens are checked (UNAUTHENTICATED), or the verify call says what is wrong
    print(
        f"leanrpc verify: warning: the server at {address} checks no tokens; {source} is not used",
        file=sys.stderr,
    )


def _describe_failure(exc, address: str, token_source: str = "") -> str:
    if exc.reason == "NOT_SERVING" and "no REPL worker can start" in exc.details:
        return (
            f"UNAVAILABLE: the server at {address} cannot start a REPL worker "
            f"({' '.join(exc.details.split())}); check its --repl-cmd or [repl] command "
            "(`leanrpc doctor --config FILE` tries it)"
        )
    if "http1.x server" in exc.details:  # grpc's words for an HTTP/1.1 answer
        return (
            f"{address} is an HTTP port (the REST gateway's, `--http-port`?), not leanrpc's gRPC "
            "port; pass --server HOST:PORT with the port `leanrpc serve` listens on"
        )
    if exc.code.name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return (
            f"cannot reach a leanrpc server at {address} ({exc.code.name}: {exc.details}); "
            "start one with `leanrpc serve`, or pass --server HOST:PORT"
        )
    if exc.code.name == "UNAUTHENTICATED" and token_source:
        return (
            f"the server at {address} refused the token from {token_source} ({exc.details}); "
            "check that it is one of the server's tokens"
        )
    if exc.code.name == "UNAUTHENTICATED":
        return (
            f"the server at {address} wants a token ({exc.details}); "
            f"set ${TOKEN_ENV}, or pass --token-file FILE or --token"
        )
    return f"{exc.code.name} from {address}: {exc.details}"
