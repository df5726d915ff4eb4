"""`leanrpc setup`: a real Lean toolchain, a (Mathlib) project and the REPL.

Owns: the setup flags (each checked while parsing: a bad value is a usage
error, exit status 2, before any step runs) and turning them into a run of
the plan. The work is split by job:

    setup_options   what was asked (SetupOptions), SetupError, the sources
    setup_plan      the named steps and their done-tests; nothing runs there
    setup_config    the recorded `lake env` environment and the config written
    setup_run       running the steps (Runner, SubprocessRunner, execute)

A failed step stops the setup with one line, exit status 1: which step, why,
and what to do without a network (see `setup_run.OFFLINE_HINTS`); `--debug`
adds the traceback above it. Tests drive `execute` with a fake runner;
`--dry-run` prints the plan.
May import: commands.argtypes, commands.setup_options, commands.setup_plan,
commands.setup_config, commands.setup_run.
"""

from __future__ import annotations

import argparse

from . import argtypes
from .setup_options import LEAN_RELEASE, REPL_REPOS, SetupOptions
from .setup_run import execute


def _lean_release(text: str) -> str:
    if not LEAN_RELEASE.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Lean release tag such as v4.19.0 or v4.20.0-rc2"
        )
    return text.strip()


def _git_revision(text: str) -> str:
    if not text.strip() or text.strip().startswith("-") or any(c.isspace() for c in text.strip()):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a git revision (a tag, branch or commit)"
        )
    return text.strip()


def add_parser(sub):
    parser = sub.add_parser(
        "setup",
        help="install a real Lean toolchain, project and REPL; write a config",
        description="Install elan, Lean, a lake project (optionally with Mathlib) and the REPL, "
        "skipping steps already done, and write a leanrpc config for them.",
    )
    parser.add_argument(
        "--lean",
        required=True,
        metavar="VERSION",
        type=_lean_release,
        help="Lean release, e.g. v4.19.0 (required)",
    )
    parser.add_argument(
        "--mathlib",
        action="store_true",
        help="a project that depends on Mathlib, with `lake exe cache get` (default: no Mathlib)",
    )
    parser.add_argument(
        "--project",
        metavar="DIR",
        type=argtypes.existing_folder,
        help="use this lake project instead of creating one (default: create one)",
    )
    parser.add_argument(
        "--workdir",
        metavar="DIR",
        type=argtypes.nonempty,
        help="where the project and REPL go (default: ~/.leanrpc/lean-VERSION)",
    )
    parser.add_argument(
        "--repl",
        choices=sorted(REPL_REPOS),
        default="upstream",
        help="leanprover-community/repl, or the augustepoiroux/repl incrementality fork "
        "(default: upstream)",
    )
    parser.add_argument(
        "--repl-rev",
        metavar="REV",
        type=_git_revision,
        help="REPL git revision (default: the Lean version tag)",
    )
    parser.add_argument(
        "--output",
        metavar="FILE",
        type=argtypes.nonempty,
        help="config file to write (default: WORKDIR/leanrpc.toml)",
    )
    parser.add_argument(
        "--workers",
        type=argtypes.positive,
        metavar="N",
        help="pool size to write into the config (default: usable CPU cores)",
    )
    parser.add_argument(
        "--via-lake",
        action="store_true",
        help="REPL command `lake env repl` (the sandbox then allows spawning) instead of the REPL "
        "binary with lake's environment (default: the binary)",
    )
    parser.add_argument(
        "--elan",
        metavar="PATH",
        type=argtypes.existing_file,
        help="a local elan-init.sh to run, for a machine without internet (default: download it)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the steps; run nothing (default: run them)"
    )
    return parser


def run(args) -> int:
    """Entry point for `leanrpc setup`: 0 when every step is done; a failed
    step raises SetupError (one line, exit status 1, printed by `main`)."""
    options = SetupOptions(
        lean_version=args.lean,
        mathlib=args.mathlib,
        workdir=args.workdir,
        project=args.project,
        repl=args.repl,
        repl_revision=args.repl_rev or "",
        config_path=args.output,
        workers=args.workers or 0,
        via_lake=args.via_lake,
        elan_installer=args.elan,
    )
    execute(options, dry_run=args.dry_run, report=lambda line: print(line, flush=True))
    return 0
