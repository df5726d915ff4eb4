"""The config `leanrpc setup` writes, and the lake environment it records.

Owns: reading the `lean-env` step's record (what `lake env` sets in the
project: LEAN_PATH, LEAN_SYSROOT, ...), building and rendering the
`leanrpc.toml` from it, and telling whether either on disk is current (a
rerun skips a current step).

The config runs the REPL binary itself with the recorded environment, not
`lake env repl`: lake would start the REPL as its child, and the sandbox's
seccomp filter (sandbox.block_spawn, docs/SECURITY.md) refuses process
creation, so "auto" turns the filter off for a `lake` command. `--via-lake`
writes the `lake env` form anyway.
May import: config, commands.setup_options.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..config import Config, to_toml
from .setup_options import SetupError, SetupOptions

# What `lake env` sets (Lake's Workspace.augmentedEnvVars) that the REPL reads.
# LEAN_SYSROOT is required, not just LEAN_PATH: without it the REPL's
# `Lean.findSysroot` runs `lean --print-prefix`, a spawn the filter refuses.
# Lake's own variables (LAKE, LEAN, ELAN_TOOLCHAIN, PATH, ...) only matter to
# programs that run lake or lean, which the REPL must not.
LEAN_ENV_VARS = (
    "LEAN_PATH",
    "LEAN_SYSROOT",
    "LEAN_SRC_PATH",
    "LD_LIBRARY_PATH",
    "DYLD_LIBRARY_PATH",
)
REQUIRED_LEAN_ENV_VARS = ("LEAN_PATH", "LEAN_SYSROOT")
# Run by `lake env` in the project: JSON survives any character in a path and
# says which variables lake left unset (printenv would just skip them).
PRINT_ENV_SCRIPT = (
    'import json, os, sys; json.dump({"cwd": os.getcwd(), '
    '"env": {k: os.environ[k] for k in sys.argv[1:] if k in os.environ}}, sys.stdout)'
)


def read_lean_env(options: SetupOptions) -> dict[str, str]:
    """The variables the `lean-env` step recorded; SetupError if unusable."""
    path = options.lean_env_path
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        cwd, env = recorded["cwd"], recorded["env"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SetupError(
            f"no usable lake environment in {path} ({exc}); rerun `leanrpc setup`"
        ) from None
    if Path(cwd).resolve() != options.project_dir:
        raise SetupError(f"{path} was recorded in {cwd}, not in the project {options.project_dir}")
    missing = [name for name in REQUIRED_LEAN_ENV_VARS if not env.get(name)]
    if missing:
        raise SetupError(
            f"`lake env` in {options.project_dir} did not set {', '.join(missing)}; "
            "this Lake is too old for the direct REPL command, rerun with --via-lake"
        )
    return {name: env[name] for name in LEAN_ENV_VARS if env.get(name)}


def lean_env_current(options: SetupOptions) -> bool:
    # Stale once lake's inputs change (`lake update`, a new toolchain) or the REPL is rebuilt.
    try:
        read_lean_env(options)
    except SetupError:
        return False
    project = options.project_dir
    inputs = [
        project / "lake-manifest.json",
        project / "lean-toolchain",
        project / "lakefile.toml",
        project / "lakefile.lean",
        options.repl_binary,
    ]
    recorded = options.lean_env_path.stat().st_mtime
    return all(recorded >= p.stat().st_mtime for p in inputs if p.exists())


def config_current(options: SetupOptions) -> bool:
    try:
        wanted = render_config(options)
    except SetupError:  # nothing recorded yet (a dry run, or before `lean-env`)
        return False
    return options.config_path.exists() and options.config_path.read_text() == wanted


def build_config(options: SetupOptions) -> Config:
    config = Config()
    config.repl.cwd = str(options.project_dir)
    # ELAN_HOME also makes the sandbox expose the toolchains under it.
    config.repl.env = {"ELAN_HOME": str(options.elan_home)}
    if options.via_lake:
        # elan's `lake` by absolute path: the server may run without elan on PATH.
        # In the project directory it picks the project's lean-toolchain.
        config.repl.command = [
            str(options.elan_home / "bin" / "lake"),
            "env",
            str(options.repl_binary),
        ]
    else:
        lean_env = read_lean_env(options)
        config.repl.command = [str(options.repl_binary)]
        config.repl.env.update(lean_env)
        config.sandbox.expose = _paths_not_exposed(options, lean_env)
    config.repl.lean_version = options.lean_version
    repo = "augustepoiroux/repl" if options.repl == "fork" else "leanprover-community/repl"
    config.repl.repl_revision = f"{repo}@{options.repl_revision}"
    config.repl.project_revision = f"mathlib {options.lean_version}" if options.mathlib else ""
    config.repl.incrementality = "on" if options.repl == "fork" else "off"
    if options.mathlib:
        config.pool.warm_headers = ["import Mathlib"]
        config.pool.header_timeout_s = 900.0
    if options.workers:
        config.pool.workers = options.workers
    return config


def _paths_not_exposed(options: SetupOptions, lean_env: dict[str, str]) -> list[str]:
    """Lean search-path directories the sandbox would not expose by itself.

    It exposes [repl] cwd (the project and its packages), ELAN_HOME (the
    toolchain) and the REPL binary's bin/..; a package or toolchain elsewhere
    (e.g. a `packagesDir` outside the project) must be named in sandbox.expose.
    """
    covered = [options.project_dir, options.elan_home.resolve(), options.repl_binary.parent.parent]
    wanted = lean_env["LEAN_PATH"].split(os.pathsep) + [lean_env["LEAN_SYSROOT"]]
    extra: list[str] = []
    for entry in wanted:
        path = Path(entry).resolve() if entry else None
        if path is None or not path.exists() or any(path.is_relative_to(c) for c in covered):
            continue
        if str(path) not in extra:
            extra.append(str(path))
    return extra


def render_config(options: SetupOptions) -> str:
    flags = (" --mathlib" if options.mathlib else "") + (" --via-lake" if options.via_lake else "")
    how = (
        '# The REPL runs under `lake env`, so sandbox.block_spawn "auto" leaves spawning allowed.\n'
        if options.via_lake
        else f"# The REPL runs directly with the environment `lake env` gives it (recorded in\n"
        f"# {options.lean_env_path}), so the sandbox's spawn filter stays on.\n"
        f"# After `lake update` in the project, rerun setup to refresh it.\n"
    )
    return (
        f"# Written by `leanrpc setup --lean {options.lean_version}{flags}`.\n{how}"
        f"# Serve with: leanrpc serve --config {options.config_path}\n\n"
        + to_toml(build_config(options))
    )
