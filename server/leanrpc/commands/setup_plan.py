"""The steps of `leanrpc setup`, built without touching anything.

Owns: the plan, a list of named steps. Each step is a list of actions
(commands to run, files to write) and a test that it is done, with the
words for what the step leaves behind (`product`): a rerun skips a step
already done, and a step whose commands all succeeded but whose product is
missing has failed (an installer that exits 0 and installs nothing is caught
at its own step, not at the next one). `--dry-run` prints the plan.

Layout under the work directory (default ~/.leanrpc/lean-<version>):

    elan-init.sh    the downloaded elan installer (unless --elan PATH)
    project/        lake project (lean-toolchain, lakefile.toml, Mathlib dep)
    repl/           the REPL checkout, built with `lake build`
    lean-env.json   what `lake env` sets in the project (LEAN_PATH, LEAN_SYSROOT, ...)
    leanrpc.toml    the config `leanrpc serve --config` reads

May import: commands.setup_options, commands.setup_config.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import sys
from pathlib import Path
from typing import Callable

from .setup_config import (
    LEAN_ENV_VARS,
    PRINT_ENV_SCRIPT,
    config_current,
    lean_env_current,
    read_lean_env,
    render_config,
)
from .setup_options import ELAN_INIT_URL, MATHLIB_GIT, REPL_REPOS, SetupOptions


@dataclasses.dataclass
class Command:
    argv: list[str]
    cwd: Path | None = None
    capture: Path | None = None  # write stdout here (only if the command succeeds)

    def describe(self) -> str:
        where = f"(in {self.cwd}) " if self.cwd else ""
        into = f" > {self.capture}" if self.capture else ""
        return where + shlex.join(self.argv) + into  # quoted: the line can be pasted into a shell


@dataclasses.dataclass
class WriteFile:
    path: Path
    # A callable is rendered when the step runs: the config depends on what
    # an earlier step recorded.
    text: str | Callable[[], str]

    def content(self) -> str:
        return self.text() if callable(self.text) else self.text

    def describe(self) -> str:
        return f"write {self.path}"


@dataclasses.dataclass
class Step:
    name: str
    summary: str
    actions: list[Command | WriteFile]
    is_done: Callable[[], bool]  # true: a rerun skips the step
    product: (
        str  # what the step leaves behind, in words (said when it is missing after the actions)
    )
    # Checked after the actions (default: is_done); may raise SetupError saying
    # what is wrong with the product. Looser than is_done where freshness is
    # not the step's to guarantee (a no-op `lake build` leaves an old binary).
    has_product: Callable[[], bool] | None = None


def plan(options: SetupOptions) -> list[Step]:
    """The steps, in order; nothing runs here."""
    elan = options.elan_home / "bin" / "elan"
    project = options.project_dir
    repl_marker = options.repl_dir / ".leanrpc-revision"
    repl_source = f"{REPL_REPOS[options.repl]}@{options.repl_revision}"
    # Download, then run: no `curl | sh`, whose status is sh's even when the
    # download failed (no pipefail in POSIX sh).
    installer = options.elan_installer or options.workdir / "elan-init.sh"
    fetch = (
        []
        if options.elan_installer
        else [Command(["curl", "-sSfL", ELAN_INIT_URL, "-o", str(installer)])]
    )
    steps = [
        Step(
            "elan",
            "install the Lean version manager",
            [
                *fetch,
                Command(
                    ["sh", str(installer), "-y", "--no-modify-path", "--default-toolchain", "none"]
                ),
            ],
            lambda: elan.exists() or shutil.which("elan") is not None,
            f"`elan` in {elan.parent} or on PATH",
        ),
        Step(
            "toolchain",
            f"install Lean {options.lean_version}",
            [Command(["elan", "toolchain", "install", options.toolchain])],
            options.toolchain_dir.is_dir,
            f"toolchain folder {options.toolchain_dir}",
        ),
    ]
    if options.project is None:
        steps.append(
            Step(
                "project",
                f"create the lake project {project}",
                [
                    WriteFile(project / "lean-toolchain", options.toolchain + "\n"),
                    WriteFile(project / "lakefile.toml", _lakefile(options)),
                ],
                lambda: (
                    (project / "lakefile.toml").exists()
                    and (project / "lean-toolchain").read_text().strip() == options.toolchain
                ),
                f"{project}/lakefile.toml with a lean-toolchain naming {options.toolchain}",
            )
        )
    if options.mathlib:
        mathlib_dir = project / ".lake" / "packages" / "mathlib"
        steps += [
            Step(
                "dependencies",
                "fetch Mathlib and its dependencies (lake update)",
                [Command(["lake", "update"], project)],
                lambda: (
                    (mathlib_dir / ".git").exists() and (project / "lake-manifest.json").exists()
                ),
                f"Mathlib checkout in {mathlib_dir} with {project}/lake-manifest.json",
            ),
            Step(
                "cache",
                "download the compiled Mathlib (lake exe cache get)",
                [Command(["lake", "exe", "cache", "get"], project)],
                lambda: _has_mathlib_oleans(mathlib_dir),
                f"Mathlib.olean under {mathlib_dir}/.lake/build/lib",
            ),
        ]
    clone = (
        Command(["git", "clone", REPL_REPOS[options.repl], str(options.repl_dir)])
        if not (options.repl_dir / ".git").exists()
        else Command(["git", "fetch", "--tags", "origin"], options.repl_dir)
    )
    steps += [
        Step(
            "repl-source",
            f"check out the REPL ({repl_source})",
            [
                clone,
                Command(["git", "checkout", "--detach", options.repl_revision], options.repl_dir),
                WriteFile(repl_marker, repl_source + "\n"),
            ],
            lambda: repl_marker.exists() and repl_marker.read_text().strip() == repl_source,
            f"{repl_marker} naming {repl_source}",
        ),
        Step(
            "repl-build",
            "build the REPL (lake build)",
            [Command(["lake", "build"], options.repl_dir)],
            lambda: options.repl_binary.exists() and _built_after(options.repl_binary, repl_marker),
            f"REPL binary {options.repl_binary}",
            options.repl_binary.exists,
        ),
    ]
    if not options.via_lake:
        steps.append(
            Step(
                "lean-env",
                f"record the environment `lake env` gives in {project}",
                [
                    Command(
                        [
                            "lake",
                            "env",
                            sys.executable,
                            "-I",
                            "-c",
                            PRINT_ENV_SCRIPT,
                            *LEAN_ENV_VARS,
                        ],
                        project,
                        capture=options.lean_env_path,
                    )
                ],
                lambda: lean_env_current(options),
                f"{options.lean_env_path} with LEAN_PATH and LEAN_SYSROOT",
                lambda: bool(read_lean_env(options)),  # SetupError says what lake left out
            )
        )
    steps.append(
        Step(
            "config",
            f"write {options.config_path}",
            [WriteFile(options.config_path, lambda: render_config(options))],
            lambda: config_current(options),
            f"{options.config_path} as this setup renders it",
        )
    )
    return steps


def _lakefile(options: SetupOptions) -> str:
    lines = ['name = "leanrpc_project"', "defaultTargets = []", ""]
    if options.mathlib:
        lines += [
            "[[require]]",
            'name = "mathlib"',
            f'git = "{MATHLIB_GIT}"',
            f'rev = "{options.lean_version}"',
            "",
        ]
    return "\n".join(lines)


def _has_mathlib_oleans(mathlib_dir: Path) -> bool:
    # The build layout moved between Lake versions.
    return any(
        (mathlib_dir / ".lake" / "build" / "lib" / sub / "Mathlib.olean").exists()
        for sub in ("lean", ".")
    )


def _built_after(binary: Path, marker: Path) -> bool:
    return not marker.exists() or binary.stat().st_mtime >= marker.stat().st_mtime
