"""Argument types: every flag value is checked while the command line is parsed.

Owns: the `type=` callables the commands share. A bad value is argparse's
usage error (the usage, then `leanrpc CMD: error: argument --FLAG: why`,
exit status 2) before anything runs: no server started, no file sent, no
step of `setup` begun. Range rules that the config schema also states
(ports, pool size) are left to the schema, which names the config key.
May import: the standard library only.
"""

from __future__ import annotations

import argparse
import math
import shlex
from pathlib import Path


def seconds(text: str) -> float:
    """0 (the server's default) or a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(
            f"{text} must be 0 (the server's default) or a positive number of seconds"
        )
    return value


def count(text: str) -> int:
    """A whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be 0 or more")
    return value


def positive(text: str) -> int:
    """A whole number, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be 1 or more")
    return value


def port(text: str) -> int:
    """A TCP port, 0 (any free port, or off for a side door) to 65535."""
    value = count(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{text} must be a port from 0 to 65535")
    return value


def command_line(text: str) -> list[str]:
    """A command line, split as a POSIX shell would; not empty, quotes closed."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:  # "No closing quotation"
        raise argparse.ArgumentTypeError(f"{text!r}: {str(exc).lower()}") from None
    if not argv:
        raise argparse.ArgumentTypeError("is empty; give the REPL's command line")
    return argv


def nonempty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty")
    return text


def existing_file(text: str) -> str:
    path = Path(text).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    return text


def existing_folder(text: str) -> str:
    path = Path(text).expanduser()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such folder")
    return text
