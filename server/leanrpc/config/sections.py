"""The sections of the configuration: one msgspec Struct per TOML table.

Owns: the constrained types (ranges are part of the type and of the error
message), `_Section` (unknown keys refused) and every `[section]` with its
keys, types, defaults and a comment per key (docs/CONFIG.md is generated from
them by commands/configref.py). May import: errors, formalize.config.
To add a knob, add a field to a section with its type and default.
"""

from __future__ import annotations

import os
import sys
import typing
from typing import Annotated, Literal

import msgspec

from ..errors import ConfigError
from ..formalize.config import FormalizeConfig

# Constrained types: the range is part of the type, and of the error message.
PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
NonNegativeFloat = Annotated[float, msgspec.Meta(ge=0)]
Percent = Annotated[float, msgspec.Meta(ge=0, le=100)]
# 0 asks the OS for any free port (tests); for metrics_port it means "off".
Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]
OnOffAuto = Literal["auto", "on", "off"]


def _default_repl_command() -> list[str]:
    return [sys.executable, "-m", "leanrpc.standin"]


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


class _Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every section: mutable, keyword-built, unknown keys refused."""


class ReplConfig(_Section):
    """How to start one REPL process."""

    # Any REPL command line; `lake env repl` (or the binary path) in a Lean
    # project for real use. The default is the embedded stand-in. TOML may
    # give it as one string (split like a shell would).
    command: list[str] = msgspec.field(default_factory=_default_repl_command)
    cwd: str | None = None
    env: dict[str, str] = msgspec.field(default_factory=dict)
    # Identity of the toolchain, part of every header-cache key. Detected by a
    # probe at boot (`#eval Lean.versionString`) when left empty.
    lean_version: str = ""
    repl_revision: str = ""
    project_revision: str = ""
    # "auto": send `incrementality: true` only when the REPL is known to be
    # the augustepoiroux fork; "on"/"off" force it.
    incrementality: OnOffAuto = "auto"
    # Turn on Elab.async via setOptions: "auto" (the fork at Lean >= 4.19),
    # "on"/true or "off"/false.
    elab_async: OnOffAuto | bool = "auto"
    # Fenced exchanges (docs/SECURITY.md, "Threat model: forged and stolen
    # verdicts"): "on" follows every command with a nonce fence and checks the
    # REPL's env counter; "off" only for fully trusted input.
    fence: Literal["on", "off"] = "on"
    # The /proc thread and fd audit after each fenced exchange: "auto" (when
    # /proc of the worker is readable), "on" (refuse to boot without it), "off".
    fence_audit: OnOffAuto = "auto"
    # Threads a REPL may start beyond its count at warm-up (Lean's task pool).
    fence_thread_allowance: NonNegativeInt = 64
    # More REPL profiles (toolchains) served by the same pool, written as
    # `[repl.<name>]` tables (or `[repl.profiles.<name>]`); a request picks one
    # by name, the plain `[repl]` keys are the default profile "". A key a
    # profile leaves out is the default profile's.
    profiles: dict[str, "ReplProfile"] = msgspec.field(default_factory=dict)

    def profile(self, name: str) -> "ReplConfig":
        """The `[repl]` settings of profile `name` ("" = the default);
        ConfigError for an unknown name."""
        if not name:
            return self
        found = self.profiles.get(name)
        if found is None:
            known = ", ".join(repr(n) for n in sorted(self.profiles)) or "none"
            raise ConfigError(f"unknown REPL profile {name!r} (configured: {known})")
        merged = {k: v for k, v in msgspec.structs.asdict(self).items() if k != "profiles"}
        merged.update(
            {
                k: v
                for k, v in msgspec.structs.asdict(found).items()
                if v is not None and k != "clients"  # who may name it, not how it runs
            }
        )
        return msgspec.convert(merged, ReplConfig)

    @property
    def profile_names(self) -> list[str]:
        """ "" (the default) first, then the named profiles."""
        return ["", *sorted(self.profiles)]


class ReplProfile(_Section):
    """One `[repl.<name>]` table: what differs from the default `[repl]`."""

    command: list[str] | None = None
    cwd: str | None = None
    env: dict[str, str] | None = None
    lean_version: str | None = None
    repl_revision: str | None = None
    project_revision: str | None = None
    incrementality: OnOffAuto | None = None
    elab_async: OnOffAuto | bool | None = None
    # Who may name this profile in a request: caller identities as the request log
    # writes them ("token:3f2a…", "cert:team-a", "peer:ipv4:10.0.0.7"); others get
    # PERMISSION_DENIED. None (left out) = every caller. A profile in `[policy]
    # trusted_profiles` must list them (services/access.py).
    clients: list[str] | None = None


class LimitsConfig(_Section):
    """Per-worker resource limits and restart triggers (0 disables each)."""

    # Memory of the worker's whole process tree (anonymous + shared memory +
    # memfds, leanrpc.worker.memory); checked during each request (every
    # memory_poll_s) and at release. 0 = the machine default (RAM x 0.8 /
    # workers, at least 1 GB), negative = off.
    max_worker_rss_mb: int = 0
    # Recycle idle workers (largest first) when system memory use passes this
    # percentage.
    max_system_memory_percent: Percent = 92.0
    # Hard RLIMIT_AS for the REPL, in MB. Off by default: Mathlib's mmapped
    # .olean files count towards it (9+ GB for `import Mathlib`).
    address_space_mb: NonNegativeInt = 0
    cpu_seconds: NonNegativeInt = 0  # RLIMIT_CPU per process
    max_processes: NonNegativeInt = 0  # RLIMIT_NPROC
    max_file_size_mb: NonNegativeInt = 0  # RLIMIT_FSIZE
    max_open_files: NonNegativeInt = 0  # RLIMIT_NOFILE, 0 = inherited
    memory_poll_s: PositiveFloat = 0.1
    # Recycle a worker after this many bodies (each keeps an env alive).
    max_requests_per_worker: NonNegativeInt = 2000
    max_frame_mb: PositiveInt = 256


class PoolConfig(_Section):
    workers: PositiveInt = msgspec.field(default_factory=usable_cores)
    queue_limit: PositiveInt = 100_000
    default_timeout_s: PositiveFloat = 60.0
    max_timeout_s: PositiveFloat = 3600.0
    header_timeout_s: PositiveFloat = 600.0
    # Retries of a request whose worker crashed or printed garbage. A crash on a
    # process that had run another request first is not counted: that request
    # goes once more, on a process nothing ran on.
    max_retries: NonNegativeInt = 1
    # Body jobs of one stream or batch run pipelined on one worker, at most this
    # many per exchange (one fence, one audit; pool/pipeline.py); 1 turns it off.
    pipeline_bodies: PositiveInt = 8
    # Circuit breaker: this many consecutive boot failures open it.
    boot_failure_limit: PositiveInt = 3
    breaker_cooldown_s: NonNegativeFloat = 30.0
    # Start this many workers (with no header) at startup.
    min_warm: NonNegativeInt = 1
    # Headers to pre-load into idle workers at startup and after restarts.
    warm_headers: list[str] = msgspec.field(default_factory=list)
    # Keep this many idle workers loaded with the most used headers: one for
    # the default REPL profile's top header first, then one for each profile
    # with traffic in the last `spare_profile_window_s`, the rest by use.
    warm_spares: NonNegativeInt = 0
    # How recent a profile's last request must be for it to keep a spare.
    spare_profile_window_s: NonNegativeFloat = 300.0
    # A queued request that has waited this long takes any idle worker, even
    # if that means loading its header there (bounds header starvation).
    # Sooner when the idle time spent waiting for the busy workers holding
    # its header reaches one measured import of it (docs/REUSE.md).
    max_wait_for_warm_s: NonNegativeFloat = 2.0
    # Headers one worker may import in-process and keep (each REPL env stays
    # alive for the life of the process); past it, or near the memory limit,
    # a header switch starts a new process. 1 = one header per process.
    max_headers_per_worker: PositiveInt = 4
    # Health: a worker stopping for longer than this counts as stuck; when
    # every slot is stuck (or dead and none can start), the server says
    # NOT_SERVING with the reason.
    stuck_after_s: PositiveFloat = 10.0
    # Per-worker history of elaborated bodies kept for prefix routing.
    prefix_history: NonNegativeInt = 64
    # Route each body to the worker with the longest reusable prefix (pool
    # trie); false: the most recently used idle worker of the header.
    prefix_routing: bool = True
    # Named sessions (see docs/REUSE.md): open at once, and envs per session.
    max_sessions: NonNegativeInt = 256
    max_session_commands: PositiveInt = 10_000
    shutdown_grace_s: NonNegativeFloat = 10.0


class ServerConfig(_Section):
    host: str = "127.0.0.1"
    port: Port = 50051
    max_message_mb: PositiveInt = 64
    max_snippets_per_batch: PositiveInt = 10_000
    max_code_chars: PositiveInt = 1_000_000
    max_concurrent_per_client: NonNegativeInt = 0  # 0 = unlimited
    # Snippets one VerifyStream may hold read but not yet answered and sent:
    # past it the stream stops reading (gRPC flow control stalls that sender only).
    max_stream_in_flight: PositiveInt = 256
    # Bearer tokens: inline, from a file (one per line), or from an env var.
    auth_tokens: list[str] = msgspec.field(default_factory=list)
    auth_token_file: str = ""
    auth_token_env: str = "LEANRPC_TOKENS"
    # Auth may be off only when explicitly allowed and bound to loopback.
    allow_unauthenticated_loopback: bool = True
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""  # set for mTLS
    metrics_port: Port = 0  # 0 = no Prometheus endpoint
    log_json: bool = False
    # Threshold of the server log (--log-level); "debug" adds per-snippet detail.
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # `leanrpc serve`'s event loop: asyncio's, or uvloop (pip install uvloop; not
    # faster here: benchmarks/RESULTS.md, issue 28). "uvloop" refuses to start without it.
    event_loop: Literal["asyncio", "uvloop"] = "asyncio"


class SandboxConfig(_Section):
    # "auto": "unshare" where the machine supports it, else off with a logged
    # warning; "unshare": refuse to start without it; "off". See docs/SECURITY.md.
    mode: Literal["auto", "unshare", "off"] = "auto"
    user: str = ""  # all workers as this user; default: a fresh uid per worker
    scratch_root: str = ""  # where the scratch mountpoint is created (default: $TMPDIR)
    scratch_mb: PositiveInt = 512  # size of each worker's private tmpfs scratch
    # Extra paths the workers must read (bind-mounted read-only past 0700 parents).
    expose: list[str] = msgspec.field(default_factory=list)
    # seccomp filter that makes fork/clone fail (threads allowed): "auto" (on,
    # except for a `lake` REPL command, which spawns the REPL), "on", "off".
    block_spawn: OnOffAuto = "auto"


class CacheConfig(_Section):
    """`[cache]`: the result cache (leanrpc.cache, docs/CACHE.md)."""

    # On by default: a byte-identical snippet under the same identity and options
    # never costs a second elaboration (VerifyOptions.cache = false bypasses it).
    enabled: bool = True
    # in-process LRU of compressed entries; at most 1 TiB (a typo like 1e12 is refused)
    memory_mb: Annotated[float, msgspec.Meta(ge=0, le=1_048_576)] = 256.0
    cache_dir: str = ""  # on-disk tier (survives restarts); "" = none
    disk_max_mb: NonNegativeFloat = 0.0  # 0 = unbounded
    redis_url: str = ""  # shared tier, e.g. redis://host:6379/0; "" = none
    redis_timeout_s: PositiveFloat = 0.25
    redis_ttl_s: PositiveInt = 7 * 24 * 3600
    breaker_failures: PositiveInt = 3  # consecutive Redis failures that open the breaker
    breaker_cooldown_s: NonNegativeFloat = 5.0
    # MAC secret of the disk and Redis entries (owner-only file; else
    # $LEANRPC_CACHE_SECRET). Required with redis_url; the disk tier alone
    # makes its own (<cache_dir>/.secret). See leanrpc.cache.seal.
    secret_file: str = ""
    # Redis auth/TLS besides the URL (cache/shared.py): ACL user, owner-only password file, rediss:// CA.
    redis_username: str = ""
    redis_password_file: str = ""
    redis_tls_ca_file: str = ""


class GatewayConfig(_Section):
    """The Kimina-compatible REST gateway (leanrpc.gateway, docs/CLIENTS.md)."""

    http_port: Port = 0  # 0 = off; `serve --http-port N` turns it on
    host: str = ""  # "" = server.host (same auth rules apply)
    # Message/sorry lines: "file" (whole snippet, like gRPC and Kimina since
    # PR #56) or "body" (after the import header, like kimina-ast-server 2.1.3).
    message_lines: Literal["file", "body"] = "file"
    header_timeout_s: PositiveFloat = (
        10.0  # request headers (and idle keep-alive); gateway/server.py
    )
    body_timeout_s: PositiveFloat = 30.0  # the body, else 408 and closed
    max_connections_per_peer: NonNegativeInt = (
        64  # open connections per address, else 429; 0 = no cap
    )


def _formalize_section() -> type:
    """`[formalize]`: one key per FormalizeConfig field (meanings there).

    TOML cannot spell None: an optional field is a string whose "" stands for
    None (no model: the Formalizer reports NOT_SERVING; tokenizer from
    model_dir; no retrieval). mathlib_names_path "auto": $LEANRPC_MATHLIB_NAMES,
    else ../shared/datasets next to a checkout. Numbers are non-negative here;
    FormalizeConfig.validate checks the finer rules when the model loads.
    """
    import dataclasses

    hints = typing.get_type_hints(FormalizeConfig)
    fields = []
    for f in dataclasses.fields(FormalizeConfig):
        kind = hints[f.name]
        if f.name == "mathlib_names_path":
            fields.append((f.name, str, "auto"))
            continue
        if type(None) in typing.get_args(kind):
            kind, default = str, ""
        elif f.default_factory is not dataclasses.MISSING:
            default = msgspec.field(default_factory=f.default_factory)
        else:
            default = f.default
        if kind is int:
            kind = NonNegativeInt
        elif kind is float:
            kind = NonNegativeFloat
        fields.append((f.name, kind, default))
    return msgspec.defstruct(
        "FormalizeSection",
        fields,
        bases=(_Section,),
        module=__name__,
        kw_only=True,
        forbid_unknown_fields=True,
    )


FormalizeSection = _formalize_section()


class ProverConfig(_Section):
    """`[prover]`: bounds of the Prover service (docs/PROVER.md)."""

    # Live proof states one client may hold; beyond: RESOURCE_EXHAUSTED.
    max_states_per_client: Annotated[int, msgspec.Meta(ge=1, le=100_000_000)] = 100_000
    # A state lives this long after its last use when StartProof gives no ttl.
    default_ttl_s: Annotated[float, msgspec.Meta(gt=0, le=31_536_000)] = 600.0
    # The largest ttl a StartProof may ask for.
    max_ttl_s: Annotated[float, msgspec.Meta(gt=0, le=31_536_000)] = 86_400.0
    # Longest tactic text accepted (RunTactic, Expand).
    max_tactic_chars: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 8_192
    # Most tactics one Expand request may carry for its state (`tactics`, run pipelined on one
    # worker).
    max_tactics_per_expand: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 64
    # Rebuild states by pickling (pickleTo / unpickleProofStateFrom): "auto"
    # when the REPL's Lean version has it (>= 4.3.0), "on", "off" (replay only).
    pickle: OnOffAuto = "auto"
    # Pickle bytes the server holds for all proofs (oldest dropped beyond it),
    # and the largest single pickle it keeps.
    max_pickle_store_mb: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)] = 1024
    max_pickle_mb: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 64
    # Before a worker holding live states is recycled: states moved (pickled,
    # or rebuilt on another worker where the REPL cannot pickle) and the time
    # the pickling may take; 0 states: rebuilt lazily on their next expansion.
    max_moved_states: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)] = 256
    move_timeout_s: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 10.0
    # MB one client's proofs and states hold (their code, tactics and goals); beyond: RESOURCE_EXHAUSTED.
    max_mb_per_client: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 1024


class PolicyConfig(_Section):
    """`[policy]`: the code policy (issue 25 item 1; docs/SECURITY.md, "Code policy")."""

    # "proof": refuse, before any REPL sees it, code that runs while Lean elaborates.
    default: Literal["proof", "trusted"] = "proof"
    # Client identities (as the request log names them, e.g. "token:3f2a…") under `trusted`.
    trusted_clients: list[str] = msgspec.field(default_factory=list)
    # REPL profiles ("" = the default [repl]) whose snippets all run under `trusted`; a
    # named one must list its `clients` ([repl.<name>] clients), or the server refuses to start.
    trusted_profiles: list[str] = msgspec.field(default_factory=list)


class JudgeConfig(_Section):
    """`[judge]`: an external checker run on VALID results that carry a
    reference (issue 25 item 5; docs/REAL-LEAN.md, "External judge")."""

    # The checker's command line (a string is split like a shell); "" = no
    # judge. It reads {"reference", "submission"} as JSON on stdin; exit 0
    # accepts, anything else refuses.
    command: str | list[str] = ""
    name: str = ""  # how results name it (default: the command's program name)
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 120.0
    max_concurrent: Annotated[int, msgspec.Meta(ge=1, le=1024)] = (
        2  # its own pool, apart from the REPLs
    )
    # Run it through the workers' launcher (their sandbox, rlimits) when true.
    sandboxed: bool = True


class SessionsConfig(_Section):
    """`[sessions]`: what one client may hold in sessions (docs/REUSE.md); `pool.max_sessions` is the total."""

    max_per_client: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 32
    # MB of session code (opening code and recorded commands) kept for one client.
    max_mb_per_client: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 64


class AxiomsConfig(_Section):
    """`[axioms]` (issue 25 item 3): `check` is the default of a request that leaves
    check_axioms unset; `allowed` is matched by exact name (never sorryAx)."""

    check: bool = True
    allowed: list[str] = msgspec.field(
        default_factory=lambda: ["propext", "Classical.choice", "Quot.sound"]
    )

    def __post_init__(self) -> None:
        for name in self.allowed:
            if (
                not name
                or name != name.strip()
                or any(c in name for c in "*?[]")
                or name == "sorryAx"
            ):
                raise ValueError(
                    f"[axioms] allowed takes exact axiom names other than sorryAx, not {name!r}"
                )
