"""Exit codes of the `leanrpc` command and the errors that map to them.

Owns: the exit-code table (also the text `--help` prints) and the tuple of
exception types that are the user's to fix (printed as one line, exit 2).
May import: config, app, edge.auth, security.sandbox (their error types).
"""

from __future__ import annotations

EXIT_OK = 0  # every file VALID / the command did what was asked
EXIT_NOT_VALID = 1  # some file is not VALID (or could not be read); doctor/setup found a problem
EXIT_USAGE = 2  # usage, configuration, start-up or connection error
EXIT_INTERNAL = 3  # a bug in leanrpc: please report it
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT), as shells report it

EXIT_CODES_HELP = """exit status:
  0  all files VALID (verify); success (other commands)
  1  some file not VALID or unreadable (verify); a failed check (doctor, setup)
  2  usage or configuration error, server cannot start or cannot be reached
  3  internal error (a bug; --debug prints the traceback)
  130  interrupted (Ctrl-C); verify prints the results received first"""


class UserError(Exception):
    """Something the user can fix; printed as one line."""

    exit_code = EXIT_USAGE


def user_errors() -> tuple[type[BaseException], ...]:
    from ..app import StartupError
    from ..config import ConfigError
    from ..edge.auth import AccessConfigError
    from ..security.sandbox import SandboxUnavailable

    return (UserError, ConfigError, StartupError, AccessConfigError, SandboxUnavailable)
