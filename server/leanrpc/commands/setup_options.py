"""What `leanrpc setup` is asked to do: its options, its error, its sources.

Owns: `SetupOptions` (the flags resolved to absolute paths, and the paths
every step derives from them), `SetupError` (a failed setup: one line, exit
status 1), and the fixed sources (elan's installer, the REPL repositories,
Mathlib). Nothing here touches the disk beyond resolving paths.
May import: commands.exits.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from .exits import EXIT_NOT_VALID, UserError

ELAN_INIT_URL = "https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh"
REPL_REPOS = {
    "upstream": "https://github.com/leanprover-community/repl",
    # The incrementality fork: `incrementality: true` requests, prefix reuse.
    "fork": "https://github.com/augustepoiroux/repl",
}
MATHLIB_GIT = "https://github.com/leanprover-community/mathlib4"
# A Lean release tag: v4.19.0, v4.20.0-rc2 (the leading "v" may be left out).
LEAN_RELEASE = re.compile(r"v?\d+\.\d+\.\d+(-rc\d+)?")


class SetupError(UserError):
    """A setup that cannot go on: which step, why, and what to do offline."""

    exit_code = EXIT_NOT_VALID  # "a failed check" in the exit-code table


@dataclasses.dataclass
class SetupOptions:
    lean_version: str  # a Lean release tag, e.g. "v4.19.0"
    mathlib: bool = False
    workdir: Path | None = None
    project: Path | None = None  # use this lake project instead of creating one
    repl: str = "upstream"  # "upstream" or "fork"
    repl_revision: str = ""  # default: the Lean version tag
    config_path: Path | None = None
    elan_home: Path | None = None
    workers: int = 0  # 0: leave the config default (one per core)
    via_lake: bool = False  # `lake env repl` instead of the binary with lake's environment
    elan_installer: Path | None = None  # a local elan-init.sh (offline); default: download it

    def __post_init__(self) -> None:
        if not self.lean_version.startswith("v"):
            self.lean_version = "v" + self.lean_version
        if self.repl not in REPL_REPOS:
            raise ValueError(f"--repl must be one of {sorted(REPL_REPOS)}")
        default_workdir = Path.home() / ".leanrpc" / f"lean-{self.lean_version}"
        self.workdir = Path(self.workdir or default_workdir).expanduser().resolve()
        self.elan_home = Path(
            self.elan_home or os.environ.get("ELAN_HOME") or Path.home() / ".elan"
        ).expanduser()
        self.repl_revision = self.repl_revision or self.lean_version
        self.config_path = (
            Path(self.config_path or self.workdir / "leanrpc.toml").expanduser().resolve()
        )
        if self.project is not None:
            self.project = Path(self.project).expanduser().resolve()
        if self.elan_installer is not None:
            self.elan_installer = Path(self.elan_installer).expanduser().resolve()
            if not self.elan_installer.is_file():
                raise SetupError(
                    f"--elan {self.elan_installer}: no such file (give a local elan-init.sh)"
                )

    @property
    def toolchain(self) -> str:
        return f"leanprover/lean4:{self.lean_version}"

    @property
    def toolchain_dir(self) -> Path:
        """Where elan keeps this toolchain (a toolchain already there is not downloaded)."""
        return self.elan_home / "toolchains" / self.toolchain.replace("/", "--").replace(":", "---")

    @property
    def project_dir(self) -> Path:
        return self.project or self.workdir / "project"

    @property
    def repl_dir(self) -> Path:
        return self.workdir / "repl"

    @property
    def repl_binary(self) -> Path:
        return self.repl_dir / ".lake" / "build" / "bin" / "repl"

    @property
    def lean_env_path(self) -> Path:
        return self.workdir / "lean-env.json"
