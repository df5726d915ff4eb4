"""The `leanrpc` command line: one module per command, one `main`.

Owns: argument parsing, exit codes, and turning every error a user can fix
into one line (no traceback unless `--debug`). Each command module
(serve, verify, setup, doctor, config, mcp) adds its subparser and a `run(args) -> int`;
`setup` is split into setup_options, setup_plan, setup_config and setup_run, and
`argtypes` checks every flag value while parsing (a usage error, exit status 2).
May import: app (serve, mcp), agents (mcp's stdio relay), config, the client (verify), and the layers the
doctor and setup commands drive.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from .. import __version__
from . import doctor, mcp, serve, setup, showconfig, verify
from .exits import EXIT_CODES_HELP, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, UserError, user_errors

COMMANDS = (serve, verify, setup, doctor, showconfig, mcp)


class _Parser(argparse.ArgumentParser):
    """A usage error is one line, `leanrpc verify: error: ...` (exit 2), as every
    other error is; `--help` still shows the usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="leanrpc",
        description="gRPC verification service for Lean 4.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"leanrpc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        command = module.add_parser(sub)
        command.epilog = EXIT_CODES_HELP
        command.formatter_class = argparse.RawDescriptionHelpFormatter
        command.add_argument(
            "--debug",
            action="store_true",
            help="print the full traceback of an error (default: one line)",
        )
        command.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # usage errors exit 2 here
    try:
        return args.run(args)
    except BrokenPipeError:
        return _stdout_closed()
    except KeyboardInterrupt:
        return 130
    except user_errors() as exc:
        if args.debug:
            traceback.print_exc()
        print(f"leanrpc {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return exc.exit_code if isinstance(exc, UserError) else EXIT_USAGE
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        hint = (
            "please report it"
            if args.debug
            else "run again with --debug for the traceback, and please report it"
        )
        print(
            f"leanrpc {args.command}: internal error: {type(exc).__name__}: {_one_line(exc)} ({hint})",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _stdout_closed() -> int:
    """The reader of stdout went away (`leanrpc verify dir/ | head -1`): a
    normal end, not an internal error. Point stdout at /dev/null so the
    interpreter's final flush raises nothing either."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass
    return EXIT_OK


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
