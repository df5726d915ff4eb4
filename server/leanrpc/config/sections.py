"""The sections of the configuration: one msgspec Struct per TOML table.

Owns: the constrained types (ranges are part of the type and of the error
message), `_Section` (unknown keys refused) and every `[section]` with its
keys, types, defaults and a description per key, in the schema itself
(`msgspec.Meta(description=...)`; docs/CONFIG.md is generated from them by
commands/configref.py, and a test fails on a key without one). May import: errors, formalize.config.
To add a knob, add a field to a section with its type, description and default.
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


# fmt: off
# One line per key: its type, meaning (msgspec.Meta description) and default
# read together; ruff would split each over six lines.
class ReplConfig(_Section):
    """How to start one REPL process."""

    command: Annotated[list[str], msgspec.Meta(description="Any REPL command line; `lake env repl` (or the binary path) in a Lean project for real use. The default is the embedded stand-in. TOML may give it as one string (split like a shell would).")] = msgspec.field(default_factory=_default_repl_command)
    cwd: Annotated[str | None, msgspec.Meta(description="Working directory of the REPL (the Lean project for `lake env repl`); unset: the server's.")] = None
    env: Annotated[dict[str, str], msgspec.Meta(description="Extra environment variables for the REPL (e.g. LEAN_PATH, LEAN_SYSROOT).")] = msgspec.field(default_factory=dict)
    lean_version: Annotated[str, msgspec.Meta(description="Identity of the toolchain, part of every header-cache key. Detected by a probe at boot (`#eval Lean.versionString`) when left empty.")] = ""
    repl_revision: Annotated[str, msgspec.Meta(description="REPL revision, part of the verifier identity and of cache keys (`leanrpc setup` fills it).")] = ""
    project_revision: Annotated[str, msgspec.Meta(description="Project revision (e.g. \"mathlib v4.19.0\"), part of the identity and of cache keys.")] = ""
    incrementality: Annotated[OnOffAuto, msgspec.Meta(description="\"auto\": send `incrementality: true` only when the REPL is known to be the augustepoiroux fork; \"on\"/\"off\" force it.")] = "auto"
    elab_async: Annotated[OnOffAuto | bool, msgspec.Meta(description="Turn on Elab.async via setOptions: \"auto\" (the fork at Lean >= 4.19), \"on\"/true or \"off\"/false.")] = "auto"
    fence: Annotated[Literal["on", "off"], msgspec.Meta(description="Fenced exchanges (docs/SECURITY.md, \"Threat model: forged and stolen verdicts\"): \"on\" follows every command with a nonce fence and checks the REPL's env counter; \"off\" only for fully trusted input.")] = "on"
    fence_audit: Annotated[OnOffAuto, msgspec.Meta(description="The /proc thread and fd audit after each fenced exchange: \"auto\" (when /proc of the worker is readable), \"on\" (refuse to boot without it), \"off\".")] = "auto"
    fence_thread_allowance: Annotated[NonNegativeInt, msgspec.Meta(description="Threads a REPL may start beyond its count at warm-up (Lean's task pool).")] = 64
    profiles: Annotated[dict[str, "ReplProfile"], msgspec.Meta(description="More REPL profiles (toolchains) served by the same pool, written as `[repl.<name>]` tables (or `[repl.profiles.<name>]`); a request picks one by name, the plain `[repl]` keys are the default profile \"\". A key a profile leaves out is the default profile's.")] = msgspec.field(default_factory=dict)

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

    max_worker_rss_mb: Annotated[int, msgspec.Meta(description="Memory of the worker's whole process tree (anonymous + shared memory + memfds, leanrpc.worker.memory); checked during each request (every memory_poll_s) and at release. 0 = the machine default (RAM x 0.8 / workers, at least 1 GB), negative = off.")] = 0
    max_system_memory_percent: Annotated[Percent, msgspec.Meta(description="Recycle idle workers (largest first) when system memory use passes this percentage.")] = 92.0
    address_space_mb: Annotated[NonNegativeInt, msgspec.Meta(description="Hard RLIMIT_AS for the REPL, in MB. Off by default: Mathlib's mmapped .olean files count towards it (9+ GB for `import Mathlib`).")] = 0
    cpu_seconds: Annotated[NonNegativeInt, msgspec.Meta(description="RLIMIT_CPU of each REPL process, in CPU seconds; 0 = none.")] = 0
    max_processes: Annotated[NonNegativeInt, msgspec.Meta(description="RLIMIT_NPROC of the REPL; 0 = none.")] = 0
    max_file_size_mb: Annotated[NonNegativeInt, msgspec.Meta(description="RLIMIT_FSIZE of the REPL, in MB; 0 = none.")] = 0
    max_open_files: Annotated[NonNegativeInt, msgspec.Meta(description="RLIMIT_NOFILE of the REPL; 0 = inherited.")] = 0
    memory_poll_s: Annotated[PositiveFloat, msgspec.Meta(description="How often a running request's worker memory is sampled, in seconds.")] = 0.1
    max_requests_per_worker: Annotated[NonNegativeInt, msgspec.Meta(description="Recycle a worker after this many bodies (each keeps an env alive).")] = 2000
    max_frame_mb: Annotated[PositiveInt, msgspec.Meta(description="Largest single REPL answer (one JSON frame) read, in MB; a larger one fails the worker.")] = 256


class PoolConfig(_Section):
    workers: Annotated[PositiveInt, msgspec.Meta(description="REPL worker processes (`serve --workers`).")] = msgspec.field(default_factory=usable_cores)
    queue_limit: Annotated[PositiveInt, msgspec.Meta(description="Snippets that may wait for a worker; past it requests are refused as overloaded (retry later).")] = 100_000
    default_timeout_s: Annotated[PositiveFloat, msgspec.Meta(description="Time limit of a snippet that asks for none (0 in the request), in seconds.")] = 60.0
    max_timeout_s: Annotated[PositiveFloat, msgspec.Meta(description="Largest time limit a request may ask for; above it the request is refused.")] = 3600.0
    header_timeout_s: Annotated[PositiveFloat, msgspec.Meta(description="Time limit of a worker boot and of loading an import header, in seconds.")] = 600.0
    max_retries: Annotated[NonNegativeInt, msgspec.Meta(description="Retries of a request whose worker crashed or printed garbage. A crash on a process that had run another request first is not counted: that request goes once more, on a process nothing ran on.")] = 1
    pipeline_bodies: Annotated[PositiveInt, msgspec.Meta(description="Body jobs of one stream or batch run pipelined on one worker, at most this many per exchange (one fence, one audit; pool/pipeline.py); 1 turns it off.")] = 16
    pipeline_group_s: Annotated[PositiveFloat, msgspec.Meta(description="A pipelined group's expected REPL time, its bodies' by the pool's body cost model, at most this many seconds: another client waits for about this long behind one group. Until a body's time is known only `pipeline_bodies` bounds a group; a lead whose own expected time is over it runs alone.")] = 2.0
    boot_failure_limit: Annotated[PositiveInt, msgspec.Meta(description="Circuit breaker: this many consecutive boot failures open it.")] = 3
    breaker_cooldown_s: Annotated[NonNegativeFloat, msgspec.Meta(description="How long an open circuit breaker refuses boots before one trial boot.")] = 30.0
    min_warm: Annotated[NonNegativeInt, msgspec.Meta(description="Start this many workers (with no header) at startup.")] = 1
    warm_headers: Annotated[list[str], msgspec.Meta(description="Headers to pre-load into idle workers at startup and after restarts.")] = msgspec.field(default_factory=list)
    warm_spares: Annotated[NonNegativeInt, msgspec.Meta(description="Keep this many idle workers loaded with the most used headers: one for the default REPL profile's top header first, then one for each profile with traffic in the last `spare_profile_window_s`, the rest by use.")] = 0
    spare_profile_window_s: Annotated[NonNegativeFloat, msgspec.Meta(description="How recent a profile's last request must be for it to keep a spare.")] = 300.0
    max_wait_for_warm_s: Annotated[NonNegativeFloat, msgspec.Meta(description="A queued request that has waited this long takes any idle worker, even if that means loading its header there (bounds header starvation). Sooner when the idle time spent waiting for the busy workers holding its header reaches one measured import of it (docs/REUSE.md).")] = 2.0
    max_headers_per_worker: Annotated[PositiveInt, msgspec.Meta(description="Headers one worker may import in-process and keep (each REPL env stays alive for the life of the process); past it, or near the memory limit, a header switch starts a new process. 1 = one header per process.")] = 4
    stuck_after_s: Annotated[PositiveFloat, msgspec.Meta(description="Health: a worker stopping for longer than this counts as stuck; when every slot is stuck (or dead and none can start), the server says NOT_SERVING with the reason.")] = 10.0
    prefix_history: Annotated[NonNegativeInt, msgspec.Meta(description="Per-worker history of elaborated bodies kept for prefix routing.")] = 64
    prefix_history_mb: Annotated[NonNegativeFloat, msgspec.Meta(description="Per-worker bound, in millions of characters, on the texts that history holds (0: no bound but the count). The newest text is always kept, so a deep chain of long tactics costs this much per worker at most, not the square of its depth.")] = 32.0
    prefix_routing: Annotated[bool, msgspec.Meta(description="Route each body to the worker with the longest reusable prefix (pool trie); false: the most recently used idle worker of the header.")] = True
    max_sessions: Annotated[NonNegativeInt, msgspec.Meta(description="Named sessions (docs/REUSE.md) open at once, for all clients together.")] = 256
    max_session_commands: Annotated[PositiveInt, msgspec.Meta(description="Commands one named session may run.")] = 10_000
    shutdown_grace_s: Annotated[NonNegativeFloat, msgspec.Meta(description="On SIGTERM/SIGINT: how long running requests may finish before workers are stopped.")] = 10.0


class ServerConfig(_Section):
    host: Annotated[str, msgspec.Meta(description="Address to listen on (`serve --host`); a non-loopback host needs auth tokens.")] = "127.0.0.1"
    port: Annotated[Port, msgspec.Meta(description="gRPC port (`serve --port`); 0 = any free port.")] = 50051
    max_message_mb: Annotated[PositiveInt, msgspec.Meta(description="Largest gRPC message, each way, in MB; also the REST gateway's largest request body.")] = 64
    max_snippets_per_batch: Annotated[PositiveInt, msgspec.Meta(description="Snippets in one Verify request or REST batch.")] = 10_000
    http2_bdp_probe: Annotated[bool, msgspec.Meta(description="gRPC's HTTP/2 BDP probing (a PING per burst of data received, to grow the flow-control window to the bandwidth-delay product). Off: the window stays at gRPC's default and each message's own length opens it once its reader waits, so large messages still flow; the PINGs and their acknowledgements are gone (about a third of gRPC's own threads' CPU in groups of 16, benchmarks/RESULTS.md, issue 38). Turn it on for many small messages over a long, fast link.")] = False
    max_code_chars: Annotated[PositiveInt, msgspec.Meta(description="Longest snippet (and reference), in characters.")] = 1_000_000
    max_concurrent_per_client: Annotated[NonNegativeInt, msgspec.Meta(description="Calls one client may have running at once; 0 = unlimited.")] = 0
    max_stream_in_flight: Annotated[PositiveInt, msgspec.Meta(description="Snippets one VerifyStream may hold read but not yet answered and sent: past it the stream stops reading (gRPC flow control stalls that sender only).")] = 256
    auth_tokens: Annotated[list[str], msgspec.Meta(description="Bearer tokens: inline, from a file (one per line), or from an env var.")] = msgspec.field(default_factory=list)
    auth_token_file: Annotated[str, msgspec.Meta(description="File with one bearer token per line (owner-only permissions).")] = ""
    auth_token_env: Annotated[str, msgspec.Meta(description="Environment variable holding bearer tokens.")] = "LEANRPC_TOKENS"
    allow_unauthenticated_loopback: Annotated[bool, msgspec.Meta(description="Auth may be off only when explicitly allowed and bound to loopback.")] = True
    tls_cert: Annotated[str, msgspec.Meta(description="PEM certificate chain; with tls_key, the gRPC port speaks TLS.")] = ""
    tls_key: Annotated[str, msgspec.Meta(description="PEM private key of tls_cert.")] = ""
    tls_client_ca: Annotated[str, msgspec.Meta(description="PEM CA certificate that client certificates are checked against; set for mTLS.")] = ""
    metrics_port: Annotated[Port, msgspec.Meta(description="Port of the Prometheus metrics endpoint; 0 = none.")] = 0
    log_json: Annotated[bool, msgspec.Meta(description="One JSON object per log line, and JSON status lines on stdout (`serve --log-json`).")] = False
    log_level: Annotated[Literal["debug", "info", "warning", "error"], msgspec.Meta(description="Threshold of the server log (--log-level); \"debug\" adds per-snippet detail.")] = "info"
    event_loop: Annotated[Literal["auto", "asyncio", "uvloop"], msgspec.Meta(description="`leanrpc serve`'s event loop: \"auto\" is uvloop where it is installed (a dependency on Linux and macOS; about 10-15% less server CPU per snippet, benchmarks/RESULTS.md, issue 38), else asyncio's; \"asyncio\" or \"uvloop\" pick one (\"uvloop\" refuses to start without it).")] = "auto"


class SandboxConfig(_Section):
    mode: Annotated[Literal["auto", "unshare", "off"], msgspec.Meta(description="\"auto\": \"unshare\" where the machine supports it, else off with a logged warning; \"unshare\": refuse to start without it; \"off\". See docs/SECURITY.md.")] = "auto"
    user: Annotated[str, msgspec.Meta(description="all workers as this user; default: a fresh uid per worker")] = ""
    scratch_root: Annotated[str, msgspec.Meta(description="where the scratch mountpoint is created (default: $TMPDIR)")] = ""
    scratch_mb: Annotated[PositiveInt, msgspec.Meta(description="Size of each worker's private tmpfs scratch, in MB.")] = 512
    expose: Annotated[list[str], msgspec.Meta(description="Extra paths the workers must read (bind-mounted read-only past 0700 parents).")] = msgspec.field(default_factory=list)
    block_spawn: Annotated[OnOffAuto, msgspec.Meta(description="seccomp filter that makes fork/clone fail (threads allowed): \"auto\" (on, except for a `lake` REPL command, which spawns the REPL), \"on\", \"off\".")] = "auto"


class CacheConfig(_Section):
    """`[cache]`: the result cache (leanrpc.cache, docs/CACHE.md)."""

    enabled: Annotated[bool, msgspec.Meta(description="On by default: a byte-identical snippet under the same identity and options never costs a second elaboration (VerifyOptions.cache = false bypasses it).")] = True
    memory_mb: Annotated[float, msgspec.Meta(ge=0, le=1_048_576, description="in-process LRU of compressed entries; at most 1 TiB (a typo like 1e12 is refused)")] = 256.0
    cache_dir: Annotated[str, msgspec.Meta(description="Folder of the on-disk tier (survives restarts); \"\" = none.")] = ""
    disk_max_mb: Annotated[NonNegativeFloat, msgspec.Meta(description="Size bound of the on-disk tier, in MB; 0 = unbounded.")] = 0.0
    redis_url: Annotated[str, msgspec.Meta(description="shared tier, e.g. redis://host:6379/0; \"\" = none")] = ""
    redis_timeout_s: Annotated[PositiveFloat, msgspec.Meta(description="Time limit of one Redis call; a slow Redis counts as a failure.")] = 0.25
    redis_ttl_s: Annotated[PositiveInt, msgspec.Meta(description="How long a Redis entry lives, in seconds.")] = 7 * 24 * 3600
    breaker_failures: Annotated[PositiveInt, msgspec.Meta(description="consecutive Redis failures that open the breaker")] = 3
    breaker_cooldown_s: Annotated[NonNegativeFloat, msgspec.Meta(description="How long the Redis tier stays off after its breaker opens.")] = 5.0
    secret_file: Annotated[str, msgspec.Meta(description="MAC secret of the disk and Redis entries (owner-only file; else $LEANRPC_CACHE_SECRET). Required with redis_url; the disk tier alone makes its own (<cache_dir>/.secret). See leanrpc.cache.seal.")] = ""
    redis_username: Annotated[str, msgspec.Meta(description="Redis ACL user name, besides the URL (cache/shared.py); \"\" = none.")] = ""
    redis_password_file: Annotated[str, msgspec.Meta(description="File holding the Redis password (owner-only permissions), besides the URL; \"\" = none.")] = ""
    redis_tls_ca_file: Annotated[str, msgspec.Meta(description="CA certificate (PEM file) that a `rediss://` Redis server's certificate is checked against; \"\" = none.")] = ""


class GatewayConfig(_Section):
    """The Kimina-compatible REST gateway (leanrpc.gateway, docs/CLIENTS.md)."""

    http_port: Annotated[Port, msgspec.Meta(description="Port of the REST gateway; 0 = off (`serve --http-port N` turns it on).")] = 0
    host: Annotated[str, msgspec.Meta(description="Address the REST gateway listens on; \"\" = server.host (the same auth rules apply).")] = ""
    message_lines: Annotated[Literal["file", "body"], msgspec.Meta(description="Message/sorry lines: \"file\" (whole snippet, like gRPC and Kimina since PR #56) or \"body\" (after the import header, like kimina-ast-server 2.1.3).")] = "file"
    header_timeout_s: Annotated[PositiveFloat, msgspec.Meta(description="Time limit for a request's headers (and for an idle keep-alive connection), in seconds (gateway/server.py).")] = 10.0
    body_timeout_s: Annotated[PositiveFloat, msgspec.Meta(description="Time limit for a request's body, in seconds; past it the answer is 408 and the connection is closed.")] = 30.0
    max_connections_per_peer: Annotated[NonNegativeInt, msgspec.Meta(description="Open connections per client address, else 429; 0 = no cap.")] = 64

# fmt: on


# What each [formalize] key means (FormalizeConfig's fields; the section is built from them).
FORMALIZE_DESCRIPTIONS = {
    "model_dir": "Local hub-layout checkpoint of a Qwen3-MoE model (config.json + safetensors).",
    "adapter_dirs": 'PEFT adapter directories (LoRA or DoRA), all loaded on the same base; each request picks one by name ("name=path" names it, else the directory\'s basename).',
    "default_adapter": 'The adapter of a request that names none: "auto" = the first configured one (none if there are none), "none" = the base model, or an adapter name.',
    "tokenizer_dir": "Where the tokenizer files are; default: model_dir.",
    "device": '"auto" (CUDA if available), "cpu", "cuda" or "cuda:N".',
    "quantize": "Whole-model NF4 with double quantization (bitsandbytes). Off: bf16 on CUDA, fp32 on CPU.",
    "compute_dtype": "Compute dtype of the 4-bit layers.",
    "grouped_dispatch": "A layer's hit experts computed together (grouped.py); off: one expert at a time.",
    "convert_dir": 'Where a fused-layout checkpoint (experts.gate_up_proj) is converted to the per-expert layout before loading; None (TOML "") = a temporary directory, removed after loading.',
    "max_batch": "Generation engine: sequences decoded together in one forward pass.",
    "max_new_tokens": "Most tokens generated for one candidate.",
    "max_prompt_tokens": "Longest prompt, in tokens; a longer one is refused when it is submitted.",
    "top_k": "Server-side sampling knobs (temperature, top_p and seed come from each request; temperature 0 = greedy). Qwen's own defaults are top_k 20, repetition_penalty 1.05.",
    "repetition_penalty": "Repetition penalty of sampling (1.0 = none; Qwen's own default is 1.05).",
    "default_max_iterations": "Repair rounds of a request that asks for no number.",
    "max_iterations_limit": "Largest `max_iterations` (repair rounds) a request may ask for; above it the request is refused.",
    "default_header": "Import header of a request that gives none.",
    "error_feedback_chars": "Characters of Lean's error messages fed back to the model in each repair round.",
    "mathlib_names_path": 'Retrieval. System A ("Did you mean" for unknown identifiers) is on whenever the names file exists; System B (top-k declarations in the first prompt) is per request (FormalizeRequest.retrieval) or forced with retrieval_default.',
    "retrieval_top_k": "Declarations retrieved into the first prompt (System B).",
    "retrieval_default": "Use System B retrieval for every request, even one that does not ask for it.",
    "retrieval_embedder": 'System B\'s dense stage: "wordllama" (weights ship in its wheel), "sentence-transformers:<local path>", or "none" (BM25 alone). Default "none": with WordLlama the dense stage found fewer of the gold statements\' Mathlib names than BM25 alone (benchmarks/RESULTS.md, "System B").',
    "retrieval_dense_n": "Declarations the dense stage keeps (top n by embedding) for BM25 to rerank to retrieval_top_k.",
    "retrieval_cache_dir": 'Where the embedded declarations are cached; None (TOML "") = ~/.cache/leanrpc/retrieval.',
    "did_you_mean_k": 'Names suggested for each unknown identifier (System A, "Did you mean").',
    "default_candidates": "Candidates sampled per repair round in one batch (request `candidates`, bounded).",
    "max_candidates": "Most candidates per repair round a request may ask for.",
    "triviality_check": "Triviality gate: a compiled statement that `by trivial/simp/decide` closes, or whose hypotheses `simp_all` refutes, is marked suspect_trivial (two more verify calls).",
    "max_jobs_per_stream": "Jobs one Formalize stream may have in flight at once.",
    "job_budget_s": "Wall-clock budget of one job in seconds (a request may ask for less); 0 = none.",
    "stream_budget_s": "Wall-clock budget of one Formalize stream in seconds: every job on it ends when it is spent; 0 = none.",
}


# fmt: off
class McpConfig(_Section):
    """`[mcp]`: the agents' door, MCP over streamable HTTP (leanrpc.agents, docs/AGENTS.md)."""

    port: Annotated[Port, msgspec.Meta(description="Port of the MCP door (streamable HTTP); 0 = off (`serve --mcp-port N` turns it on).")] = 0
    host: Annotated[str, msgspec.Meta(description="Address the MCP door listens on; \"\" = server.host (the same auth rules apply: tokens off loopback).")] = ""
    path: Annotated[str, msgspec.Meta(description="URL path of the MCP endpoint (the protocol's usual one is /mcp).")] = "/mcp"
    max_output_chars: Annotated[int, msgspec.Meta(ge=1024, le=10_000_000, description="Characters of one tool result's JSON; longer messages and goals are cut, with a note.")] = 20_000
    max_field_chars: Annotated[int, msgspec.Meta(ge=64, le=10_000_000, description="Characters of one message text or goal before it is cut (within the result's budget).")] = 4_000
    max_attempts: Annotated[int, msgspec.Meta(ge=1, le=256, description="Tactics one lean_multi_attempt may carry (each runs as its own pool job).")] = 16
    max_search_k: Annotated[int, msgspec.Meta(ge=1, le=200, description="Most declarations one lean_search returns.")] = 50
    max_sessions: Annotated[int, msgspec.Meta(ge=1, le=100_000, description="MCP sessions held at once (all agents); past it a new session is refused.")] = 1_000
    session_idle_timeout_s: Annotated[PositiveFloat, msgspec.Meta(description="Seconds an MCP session nobody uses is kept (its proof states live on, by their TTL).")] = 1_800.0

    def __post_init__(self) -> None:
        if not self.path.startswith("/") or any(c in self.path for c in " ?#"):
            raise ValueError(f'[mcp] path must be a URL path such as "/mcp", not {self.path!r}')
# fmt: on


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
            fields.append((f.name, _described(str, f.name), "auto"))
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
        fields.append((f.name, _described(kind, f.name), default))
    return msgspec.defstruct(
        "FormalizeSection",
        fields,
        bases=(_Section,),
        module=__name__,
        kw_only=True,
        forbid_unknown_fields=True,
    )


def _described(kind, name: str):
    # KeyError for a FormalizeConfig field without a description: none may lack one.
    return Annotated[kind, msgspec.Meta(description=FORMALIZE_DESCRIPTIONS[name])]


FormalizeSection = _formalize_section()


# fmt: off
class ProverConfig(_Section):
    """`[prover]`: bounds of the Prover service (docs/PROVER.md)."""

    max_states_per_client: Annotated[int, msgspec.Meta(ge=1, le=100_000_000, description="Live proof states one client may hold; beyond: RESOURCE_EXHAUSTED.")] = 100_000
    default_ttl_s: Annotated[float, msgspec.Meta(gt=0, le=31_536_000, description="A state lives this long after its last use when StartProof gives no ttl.")] = 600.0
    max_ttl_s: Annotated[float, msgspec.Meta(gt=0, le=31_536_000, description="The largest ttl a StartProof may ask for.")] = 86_400.0
    max_tactic_chars: Annotated[int, msgspec.Meta(ge=1, le=1_000_000, description="Longest tactic text accepted (RunTactic, Expand).")] = 8_192
    max_tactics_per_expand: Annotated[int, msgspec.Meta(ge=1, le=4096, description="Most tactics one Expand request may carry for its state (`tactics`, run pipelined on one worker).")] = 64
    pickle: Annotated[OnOffAuto, msgspec.Meta(description="Rebuild states by pickling (pickleTo / unpickleProofStateFrom): \"auto\" when the REPL's Lean version has it (>= 4.3.0), \"on\", \"off\" (replay only).")] = "auto"
    max_pickle_store_mb: Annotated[int, msgspec.Meta(ge=0, le=1_000_000, description="Pickle bytes, in MB, the server holds for all proofs (oldest dropped beyond it).")] = 1024
    max_pickle_mb: Annotated[int, msgspec.Meta(ge=1, le=100_000, description="Largest single pickle the server keeps, in MB (see max_pickle_store_mb).")] = 64
    max_moved_states: Annotated[int, msgspec.Meta(ge=0, le=1_000_000, description="Before a worker holding live states is recycled: states moved (pickled, or rebuilt on another worker where the REPL cannot pickle) and the time the pickling may take; 0 states: rebuilt lazily on their next expansion.")] = 256
    move_timeout_s: Annotated[float, msgspec.Meta(ge=0, le=3600, description="Time the pickling of a recycled worker's states may take, in seconds (see max_moved_states).")] = 10.0
    max_mb_per_client: Annotated[int, msgspec.Meta(ge=1, le=1_000_000, description="MB one client's proofs and states hold (their code, tactics and goals), charged as really held: about 4x the size of ASCII code or tactics, 2.5-3.25x of 4-byte characters (services/prover/registry.py proof_bytes, tactic_bytes); beyond: RESOURCE_EXHAUSTED.")] = 1024
    max_mb_total: Annotated[int, msgspec.Meta(ge=1, le=1_000_000, description="MB all clients' proofs and states hold together (issue 44 item 2), charged alike; beyond: RESOURCE_EXHAUSTED naming this key.")] = 4096


class PolicyConfig(_Section):
    """`[policy]`: the code policy (issue 25 item 1; docs/SECURITY.md, "Code policy")."""

    default: Annotated[Literal["proof", "trusted"], msgspec.Meta(description="\"proof\": refuse, before any REPL sees it, code that runs while Lean elaborates.")] = "proof"
    trusted_clients: Annotated[list[str], msgspec.Meta(description="Client identities (as the request log names them, e.g. \"token:3f2a…\") under `trusted`.")] = msgspec.field(default_factory=list)
    trusted_profiles: Annotated[list[str], msgspec.Meta(description="REPL profiles (\"\" = the default [repl]) whose snippets all run under `trusted`; a named one must list its `clients` ([repl.<name>] clients), or the server refuses to start.")] = msgspec.field(default_factory=list)


class JudgeConfig(_Section):
    """`[judge]`: an external checker run on VALID results that carry a
    reference (issue 25 item 5; docs/REAL-LEAN.md, "External judge")."""

    command: Annotated[str | list[str], msgspec.Meta(description="The checker's command line (a string is split like a shell); \"\" = no judge. It reads {\"reference\", \"submission\"} as JSON on stdin; exit 0 accepts, anything else refuses.")] = ""
    name: Annotated[str, msgspec.Meta(description="how results name it (default: the command's program name)")] = ""
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400, description="Time limit of one run of the judge, in seconds.")] = 120.0
    max_concurrent: Annotated[int, msgspec.Meta(ge=1, le=1024, description="Judge runs at once, in a pool of its own, apart from the REPLs.")] = 2
    sandboxed: Annotated[bool, msgspec.Meta(description="Run it through the workers' launcher (their sandbox, rlimits) when true.")] = True


class SessionsConfig(_Section):
    """`[sessions]`: what one client may hold in sessions (docs/REUSE.md); `pool.max_sessions` is the total."""

    max_per_client: Annotated[int, msgspec.Meta(ge=1, le=1_000_000, description="Sessions one client may hold open at once; clamped at start-up to half of pool.max_sessions (at least 1, logged), so one client never holds every session.")] = 32
    max_mb_per_client: Annotated[int, msgspec.Meta(ge=1, le=1_000_000, description="MB the server holds for one client's session code (opening code and recorded commands), charged as really held: about 5x the code's size (pool/sessions.py held_cost).")] = 256
    max_mb_total: Annotated[int, msgspec.Meta(ge=1, le=1_000_000, description="MB the server holds for all clients' session code together (issue 44 item 2), charged alike.")] = 1024


class CanaryConfig(_Section):
    """`[canary]` (issue 43 item 5; docs/SECURITY.md, "Canaries"): before a job, a
    worker may first get a canary, a statement whose truth the pool knows, written
    like client work on the job's header. A wrong answer poisons the worker (its
    cache entries are withdrawn) and the job runs on another."""

    enabled: Annotated[bool, msgspec.Meta(description="Send canaries at all.")] = True
    rate: Annotated[float, msgspec.Meta(ge=0, le=1, description="The chance that a job comes after a canary on its worker, drawn per job at random.")] = 0.05
    on_client_switch: Annotated[bool, msgspec.Meta(description="Always a canary before a worker that served one client serves another.")] = True
    timeout_s: Annotated[PositiveFloat, msgspec.Meta(description="Seconds a canary may take; a worker that gives no answer in time is replaced.")] = 60.0


class MemoryConfig(_Section):
    """`[memory]` (issue 44): bytes of requests in flight, per peer address and in all,
    on every door (edge/budget.py); docs/RELIABILITY.md has the memory table."""

    in_flight_mb_per_peer: Annotated[int, msgspec.Meta(ge=0, le=1_000_000, description="MB that one peer address's requests may hold while read and served; 0 = no limit. A request is charged up to 6x its size (raw, parsed, decoded strings; docs/RELIABILITY.md): keep it at least 6 x server.max_message_mb, or the largest requests never fit.")] = 512
    in_flight_mb: Annotated[int, msgspec.Meta(ge=0, le=1_000_000, description="MB that all requests in flight may hold together; 0 = no limit.")] = 2048
    discard_mb: Annotated[int, msgspec.Meta(ge=0, le=1_000_000, description="MB of a refused REST body read and thrown away so the client can read the refusal.")] = 128


class AxiomsConfig(_Section):
    """`[axioms]` (issue 25 item 3): `check` is the default of a request that leaves
    check_axioms unset; `allowed` is matched by exact name (never sorryAx)."""

    check: Annotated[bool, msgspec.Meta(description="Check axioms (`#print axioms`) for a request that leaves check_axioms unset.")] = True
    allowed: Annotated[list[str], msgspec.Meta(description="Axioms a proof may use, by exact name (never sorryAx; no patterns).")] = msgspec.field(default_factory=lambda: ["propext", "Classical.choice", "Quot.sound"])

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
# fmt: on
