"""One typed configuration object, loadable from TOML and from CLI flags.

Every knob has a default that works on the embedded stand-in REPL, so
`leanrpc serve` with no configuration runs. A real Lean setup changes only
`[repl]` (see README, "Real Lean").
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

from .errors import RequestError
from .formalize.config import FormalizeConfig


def _default_repl_command() -> list[str]:
    return [sys.executable, "-m", "leanrpc.standin"]


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


@dataclasses.dataclass
class ReplConfig:
    """How to start one REPL process."""

    # Any REPL command line; `lake env repl` (or the binary path) in a Lean
    # project for real use. The default is the embedded stand-in.
    command: list[str] = dataclasses.field(default_factory=_default_repl_command)
    cwd: str | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    # Identity of the toolchain, part of every header-cache key. Detected by a
    # probe at boot (`#eval Lean.versionString`) when left empty.
    lean_version: str = ""
    repl_revision: str = ""
    project_revision: str = ""
    # "auto": send `incrementality: true` only when the REPL is known to be
    # the augustepoiroux fork; "on"/"off" force it.
    incrementality: str = "auto"
    # Turn on Elab.async via setOptions: "auto" (the fork at Lean >= 4.19),
    # "on"/true or "off"/false.
    elab_async: str | bool = "auto"
    # Fenced exchanges (docs/SECURITY.md, "Threat model: forged and stolen
    # verdicts"): "on" follows every command with a nonce fence and checks the
    # REPL's env counter; "off" only for fully trusted input.
    fence: str = "on"
    # The /proc thread and fd audit after each fenced exchange: "auto" (when
    # /proc of the worker is readable), "on" (refuse to boot without it), "off".
    fence_audit: str = "auto"
    # Threads a REPL may start beyond its count at warm-up (Lean's task pool).
    fence_thread_allowance: int = 64


@dataclasses.dataclass
class LimitsConfig:
    """Per-worker resource limits and restart triggers."""

    # Resident memory of the worker's whole process tree; checked during each
    # request (every memory_poll_s) and at release. 0 disables.
    max_worker_rss_mb: int = 0
    # Recycle idle workers (largest first) when system memory use passes this
    # percentage. 0 disables.
    max_system_memory_percent: float = 92.0
    # Hard RLIMIT_AS for the REPL, in MB. Off by default: Mathlib's mmapped
    # .olean files count towards it (9+ GB for `import Mathlib`).
    address_space_mb: int = 0
    cpu_seconds: int = 0          # RLIMIT_CPU per process, 0 = unlimited
    max_processes: int = 0        # RLIMIT_NPROC, 0 = unlimited
    max_file_size_mb: int = 0     # RLIMIT_FSIZE, 0 = unlimited
    max_open_files: int = 0       # RLIMIT_NOFILE, 0 = inherited
    memory_poll_s: float = 0.1
    # Recycle a worker after this many bodies (each keeps an env alive).
    max_requests_per_worker: int = 2000
    max_frame_mb: int = 256


@dataclasses.dataclass
class PoolConfig:
    workers: int = dataclasses.field(default_factory=usable_cores)
    queue_limit: int = 100_000
    default_timeout_s: float = 60.0
    max_timeout_s: float = 3600.0
    header_timeout_s: float = 600.0
    # Retries of a request whose worker crashed or printed garbage.
    max_retries: int = 1
    # Circuit breaker: this many consecutive boot failures open it.
    boot_failure_limit: int = 3
    breaker_cooldown_s: float = 30.0
    # Start this many workers (with no header) at startup.
    min_warm: int = 1
    # Headers to pre-load into idle workers at startup and after restarts.
    warm_headers: list[str] = dataclasses.field(default_factory=list)
    # Keep this many idle workers loaded with the most used headers.
    warm_spares: int = 0
    # A queued request that has waited this long takes any idle worker, even
    # if that means loading its header there (bounds header starvation).
    max_wait_for_warm_s: float = 2.0
    # Per-worker history of elaborated bodies kept for prefix routing.
    prefix_history: int = 64
    # Route each body to the worker with the longest reusable prefix (pool
    # trie); false: the most recently used idle worker of the header.
    prefix_routing: bool = True
    # Named sessions (see docs/REUSE.md): open at once, and envs per session.
    max_sessions: int = 256
    max_session_commands: int = 10_000
    shutdown_grace_s: float = 10.0


@dataclasses.dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 50051
    max_message_mb: int = 64
    max_snippets_per_batch: int = 10_000
    max_code_chars: int = 1_000_000
    max_concurrent_per_client: int = 0  # 0 = unlimited
    # Bearer tokens: inline, from a file (one per line), or from an env var.
    auth_tokens: list[str] = dataclasses.field(default_factory=list)
    auth_token_file: str = ""
    auth_token_env: str = "LEANRPC_TOKENS"
    # Auth may be off only when explicitly allowed and bound to loopback.
    allow_unauthenticated_loopback: bool = True
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""  # set for mTLS
    metrics_port: int = 0  # 0 = no Prometheus endpoint
    log_json: bool = False


@dataclasses.dataclass
class SandboxConfig:
    # "auto": "unshare" where the machine supports it, else off with a logged
    # warning; "unshare": refuse to start without it; "off". See docs/SECURITY.md.
    mode: str = "auto"
    user: str = ""  # all workers as this user; default: a fresh uid per worker
    scratch_root: str = ""  # where the scratch mountpoint is created (default: $TMPDIR)
    scratch_mb: int = 512  # size of each worker's private tmpfs scratch
    # Extra paths the workers must read (bind-mounted read-only past 0700 parents).
    expose: list[str] = dataclasses.field(default_factory=list)
    # seccomp filter that makes fork/clone fail (threads allowed): "auto" (on,
    # except for a `lake` REPL command, which spawns the REPL), "on", "off".
    block_spawn: str = "auto"


def _toml_section(cls: type, name: str, unset_defaults: dict[str, str]) -> type:
    """A dataclass with `cls`'s fields and defaults, for a TOML section.

    TOML cannot spell None: an optional field becomes a string whose default
    is "" (None) unless `unset_defaults` names another spelling.
    """
    fields = []
    for f in dataclasses.fields(cls):
        if f.name in unset_defaults or "None" in str(f.type):
            fields.append((f.name, str, dataclasses.field(default=unset_defaults.get(f.name, ""))))
        elif f.default_factory is not dataclasses.MISSING:
            fields.append((f.name, f.type, dataclasses.field(default_factory=f.default_factory)))
        else:
            fields.append((f.name, f.type, dataclasses.field(default=f.default)))
    section = dataclasses.make_dataclass(name, fields)
    section.__module__ = __name__
    return section


# `[formalize]`: one key per leanrpc.formalize.config.FormalizeConfig field
# (meanings there). "" stands for None: no model (the Formalizer reports
# NOT_SERVING), tokenizer from model_dir, no retrieval. mathlib_names_path
# "auto": $LEANRPC_MATHLIB_NAMES, else ../shared/datasets next to a checkout.
FormalizeSection = _toml_section(FormalizeConfig, "FormalizeSection", {"mathlib_names_path": "auto"})


@dataclasses.dataclass
class Config:
    repl: ReplConfig = dataclasses.field(default_factory=ReplConfig)
    limits: LimitsConfig = dataclasses.field(default_factory=LimitsConfig)
    pool: PoolConfig = dataclasses.field(default_factory=PoolConfig)
    server: ServerConfig = dataclasses.field(default_factory=ServerConfig)
    sandbox: SandboxConfig = dataclasses.field(default_factory=SandboxConfig)
    formalize: FormalizeSection = dataclasses.field(default_factory=FormalizeSection)

    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> "Config":
        with open(path, "rb") as f:
            data = tomllib.load(f)
        config = cls.from_dict(data)
        if config.repl.cwd:
            config.repl.cwd = str((Path(path).parent / config.repl.cwd).resolve())
        return config

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Config":
        config = cls()
        for section_name, section_data in data.items():
            if not hasattr(config, section_name):
                raise RequestError(f"unknown config section [{section_name}]")
            section = getattr(config, section_name)
            if not isinstance(section_data, dict):
                raise RequestError(f"config section [{section_name}] must be a table")
            _update_section(section, section_name, section_data)
        return config

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _update_section(section: Any, name: str, values: dict[str, Any]) -> None:
    fields = {f.name: f for f in dataclasses.fields(section)}
    for key, value in values.items():
        if key not in fields:
            raise RequestError(f"unknown config key {name}.{key}")
        current = getattr(section, key)
        if key == "command" and isinstance(value, str):
            value = shlex.split(value)
        if isinstance(current, bool) and not isinstance(value, bool):
            raise RequestError(f"config key {name}.{key} must be a boolean")
        if isinstance(current, (int, float)) and not isinstance(current, bool):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise RequestError(f"config key {name}.{key} must be a number")
            if isinstance(current, int) and not float(value).is_integer():
                raise RequestError(f"config key {name}.{key} must be an integer, not {value!r}")
            value = type(current)(value)
        elif isinstance(current, list) and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise RequestError(f"config key {name}.{key} must be a list of strings")
        elif isinstance(current, dict) and not isinstance(value, dict):
            raise RequestError(f"config key {name}.{key} must be a table")
        elif (current is None or isinstance(current, str)) and not isinstance(value, str):
            # `str | bool` fields (elab_async) also take a boolean.
            if not (isinstance(value, bool) and "bool" in str(fields[key].type)):
                raise RequestError(f"config key {name}.{key} must be a string")
        setattr(section, key, value)


def to_toml(config: Config) -> str:
    """Renders a config as TOML (used by `leanrpc setup`)."""
    lines: list[str] = []
    for section_name, section in config.to_dict().items():
        lines.append(f"[{section_name}]")
        for key, value in section.items():
            if value is None:
                continue
            lines.append(f"{key} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot render {type(value).__name__} as TOML")
