"""`leanrpc config`: the effective configuration as commented TOML.

Owns: the `config` subcommand. `leanrpc config` prints what `serve` would
run with (the file found on the search path, then the LEANRPC_<SECTION>__<KEY>
environment variables), `--defaults` the built-in defaults; either is a file
to start from. `--reference` prints docs/CONFIG.md. May import: config, commands.configref.
"""

from __future__ import annotations

import argparse
import sys

from ..config import Config
from . import configref


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "config",
        help="print the effective configuration as commented TOML (--defaults: the defaults)",
        description="Print the configuration `serve` would use, as TOML with each key's meaning, type and "
        "default as comments. Search path: --config, $LEANRPC_CONFIG, ./leanrpc.toml, "
        "$XDG_CONFIG_HOME/leanrpc/leanrpc.toml; then LEANRPC_<SECTION>__<KEY> variables.",
    )
    parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="print the built-in defaults, ignoring any file and the environment (default: the effective config)",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help=f"print the key reference in Markdown, docs/CONFIG.md: `{configref.REGENERATE}` (default: off)",
    )
    return parser


CONFIG_HELP = (
    "TOML configuration file (default: $LEANRPC_CONFIG, else ./leanrpc.toml, else "
    "$XDG_CONFIG_HOME/leanrpc/leanrpc.toml, else built-in defaults)"
)


def run(args) -> int:
    if args.reference:
        sys.stdout.write(configref.reference_markdown())
        return 0
    if args.defaults:
        sys.stdout.write(configref.commented_toml(Config(), "built-in defaults"))
        return 0
    config, path = configref.load(args.config)
    sys.stdout.write(
        configref.commented_toml(config, f"from {path}" if path else "no file found: defaults")
    )
    return 0
