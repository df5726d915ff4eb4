"""Finding the config, environment overrides, and the key reference.

Owns: the search path (`--config`, then $LEANRPC_CONFIG, then ./leanrpc.toml,
then $XDG_CONFIG_HOME/leanrpc/leanrpc.toml), the environment scheme
(`LEANRPC_<SECTION>__<KEY>=value`, the value read as a TOML value, else as a
string: `LEANRPC_POOL__WORKERS=8`), `leanrpc config`'s commented TOML, and
docs/CONFIG.md, generated from the msgspec schema alone (types, ranges,
defaults and each key's `msgspec.Meta` description in config/sections.py), so
docs and code cannot drift (tests/config/test_config_reference.py holds them
equal and fails on a key without a description).
Regenerate the page with `leanrpc config --reference > docs/CONFIG.md`.
May import: config.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import textwrap
import tomllib
import typing
from pathlib import Path
from typing import Annotated, Any, Mapping

import msgspec

from .. import config as schema
from ..config import Config, ConfigError

ENV_PREFIX = "LEANRPC_"
REGENERATE = "leanrpc config --reference > docs/CONFIG.md"

# Defaults computed on the machine that runs: the reference names them in words.
_COMPUTED = {
    "_default_repl_command": "the stand-in (this Python, `-m leanrpc.standin`)",
    "usable_cores": "the usable CPU cores",
}
# Sections whose struct has no docstring of its own.
_SECTION_DOC = {
    "pool": "The REPL worker pool: size, queue, timeouts, warm workers, health, sessions.",
    "server": "The gRPC server: address, message and batch bounds, auth, TLS, metrics, logging.",
    "sandbox": "How each worker is isolated (docs/SECURITY.md).",
    "formalize": "The Formalize service (docs/FORMALIZE.md); one key per FormalizeConfig field.",
}

# ---- where the config comes from ---------------------------------------------


def search_path(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The files looked for when --config is not given, in order."""
    env = os.environ if environ is None else environ
    paths = []
    if env.get("LEANRPC_CONFIG"):
        paths.append(Path(env["LEANRPC_CONFIG"]).expanduser())
    paths.append(Path("leanrpc.toml"))
    xdg = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or "~").expanduser() / ".config")
    paths.append(Path(xdg) / "leanrpc" / "leanrpc.toml")
    return paths


def find_config(explicit: str | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """--config if given, else $LEANRPC_CONFIG if set (both must exist: loading
    says so), else the first of ./leanrpc.toml and the XDG file that exists."""
    env = os.environ if environ is None else environ
    if explicit:
        return Path(explicit)
    if env.get("LEANRPC_CONFIG"):
        return Path(env["LEANRPC_CONFIG"]).expanduser()
    return next((p for p in search_path(env) if p.is_file()), None)


def env_overrides(environ: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """{section: {key: value}} from LEANRPC_<SECTION>__<KEY> variables; an
    unknown section or key is a ConfigError naming the variable."""
    env = os.environ if environ is None else environ
    sections = {name: kind for name, kind in _section_types().items()}
    out: dict[str, dict[str, Any]] = {}
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX) :].lower().partition("__")
        if section not in sections:
            raise ConfigError(
                f"environment variable {name}: unknown config section [{section}] "
                f"(known: {', '.join(sections)})"
            )
        fields = {
            # the base type: a key's Annotated (range, description) is not its kind
            f.name: typing.get_args(f.type)[0] if typing.get_origin(f.type) is Annotated else f.type
            for f in msgspec.structs.fields(sections[section])
        }
        if key not in fields:
            raise ConfigError(f"environment variable {name}: unknown config key {section}.{key}")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        if fields[key] is str and not isinstance(value, str):
            value = (
                raw  # a string key takes the text as written (LEANRPC_SERVER__HOST=10.0.0.1 too)
            )
        out.setdefault(section, {})[key] = value
    return out


def load(
    explicit: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Config, Path | None]:
    """The effective config and the file it came from: the file found (if
    any), then the environment's keys over it; validated."""
    path = find_config(explicit, environ)
    config = Config.from_toml(path) if path is not None else Config()
    overrides = env_overrides(environ)
    if overrides:
        data = _drop_none(config.to_dict())
        for section, values in overrides.items():
            data[section] = {**(data.get(section) or {}), **values}
        try:
            config = Config.from_dict(data)
        except ConfigError as exc:
            named = [
                f"{ENV_PREFIX}{s.upper()}__{k.upper()}"
                for s, keys in overrides.items()
                for k in keys
                if f"{s}.{k}" in str(exc)
            ]
            raise ConfigError(f"{exc} (set by {', '.join(named) or 'the environment'})") from None
    return config, path


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value


# ---- the reference: keys, types, defaults, comments --------------------------


@dataclasses.dataclass(frozen=True)
class Key:
    name: str
    type: Any
    default: Any  # the value on this machine
    shown_default: str  # the same, machine-independent (computed defaults in words)
    comment: str  # its description in the schema


def _section_types() -> dict[str, type]:
    return {f.name: f.type for f in msgspec.structs.fields(Config)}


def description(kind: type, key: str) -> str:
    """The key's `msgspec.Meta(description=...)` in the schema ("" for none)."""
    hint = typing.get_type_hints(kind, include_extras=True)[key]
    metas = typing.get_args(hint)[1:] if typing.get_origin(hint) is Annotated else ()
    return " ".join(m.description for m in metas if isinstance(m, msgspec.Meta) and m.description)


def _section_doc(name: str, kind: type) -> str:
    own = kind.__dict__.get("__doc__") if name not in _SECTION_DOC else None
    return (
        inspect.cleandoc(own).split("\n\n")[0].replace("\n", " ")
        if own
        else _SECTION_DOC.get(name, "")
    )


def _shown_default(field: msgspec.structs.FieldInfo) -> str:
    factory = field.default_factory
    if factory is not msgspec.NODEFAULT and getattr(factory, "__name__", "") in _COMPUTED:
        return _COMPUTED[factory.__name__]
    value = factory() if factory is not msgspec.NODEFAULT else field.default
    return inline(value) or "unset"


def sections() -> list[tuple[str, type, list[Key]]]:
    """[(section, struct, keys)] in schema order."""
    result = []
    defaults = Config()
    for name, kind in _section_types().items():
        section_default = getattr(defaults, name)
        keys = [
            Key(
                f.name,
                f.type,
                getattr(section_default, f.name),
                _shown_default(f),
                description(kind, f.name),
            )
            for f in msgspec.structs.fields(kind)
        ]
        result.append((name, kind, keys))
    return result


def inline(value: Any) -> str:
    """One-line TOML for a value ("" for None, which TOML cannot spell)."""
    value = msgspec.to_builtins(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(inline(v) for v in value) + "]"
    if isinstance(value, dict):
        items = [f"{_bare(k)} = {inline(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    raise TypeError(f"no TOML for {value!r}")


def _bare(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def commented_toml(config: Config, source: str = "") -> str:
    """`config` as TOML, each key with its meaning, type and default as comments."""
    out = [
        "# leanrpc configuration, printed by `leanrpc config`"
        + (f" ({source})" if source else "")
        + ".",
        "# Any key may be set in the environment as LEANRPC_<SECTION>__<KEY> (LEANRPC_POOL__WORKERS=8).",
        "# Reference: docs/CONFIG.md.",
        "",
    ]
    for name, _kind, keys in sections():
        doc = _section_doc(name, _kind)
        out += [f"# {doc}" if doc else "", f"[{name}]"]
        current = getattr(config, name)
        for key in keys:
            if key.comment:
                out += textwrap.wrap(key.comment, 98, initial_indent="# ", subsequent_indent="# ")
            out.append(f"# {schema._describe(key.type)}; default: {key.shown_default}")
            rendered = inline(getattr(current, key.name))
            out.append(f"{key.name} = {rendered}" if rendered else f"# {key.name}: unset")
        out.append("")
    return (
        "\n".join(line for i, line in enumerate(out) if line or i < 4 or out[i - 1]).rstrip() + "\n"
    )


def reference_markdown() -> str:
    """The text of docs/CONFIG.md."""
    out = [
        "# Configuration reference",
        "",
        f"Generated from the schema in `server/leanrpc/config/sections.py`: after changing a key, run `{REGENERATE}`.",
        "`tests/config/test_config_reference.py` fails when this page and the schema differ. Do not edit by hand.",
        "",
        "## Where the config comes from",
        "",
        "Every command that reads a config (`serve`, `doctor`, `config`) takes the first of:",
        "",
        "1. `--config FILE`;",
        "2. `$LEANRPC_CONFIG` (when set, the file must exist);",
        "3. `./leanrpc.toml`;",
        "4. `$XDG_CONFIG_HOME/leanrpc/leanrpc.toml` (default `~/.config/leanrpc/leanrpc.toml`);",
        "5. none: the built-in defaults below.",
        "",
        "Then each `LEANRPC_<SECTION>__<KEY>` environment variable sets its key (section and key",
        "upper-cased, joined by two underscores). The value is read as a TOML value, else as a string:",
        "`LEANRPC_POOL__WORKERS=8`, `LEANRPC_SERVER__LOG_LEVEL=debug`,",
        '`LEANRPC_REPL__COMMAND=\'["lake", "env", "repl"]\'` (or `\'lake env repl\'`, split like a shell).',
        "An unknown section or key in such a variable is an error that names it. Then `serve`'s flags.",
        "",
        "`leanrpc config` prints the effective config as commented TOML (a file to start from:",
        "`leanrpc config > leanrpc.toml`); `leanrpc config --defaults` prints the defaults.",
        "",
        "Other environment variables:",
        "",
        "- `LEANRPC_TOKENS`: bearer tokens, one per line or comma-separated (the name is `[server] auth_token_env`).",
        "- `LEANRPC_CACHE_SECRET`: the MAC secret of the disk and Redis cache tiers, when `[cache] secret_file` is unset.",
        "- `LEANRPC_MATHLIB_NAMES`: the Mathlib declaration-name list for Formalize retrieval.",
        "- `LEANRPC_NO_EXTENSIONS=1`: use the pure-Python core instead of the compiled one.",
        "- `LEANRPC_SHARED`: the folder holding `datasets/` (a checkout's `shared/`) that",
        "  `python -m benchmarks.load run` reads its snippets from; it has no default, and the",
        "  benchmark says so in one line when it is unset.",
        "",
    ]
    for name, kind, keys in sections():
        out += [
            f"## [{name}]",
            "",
            _section_doc(name, kind),
            "",
            "| key | type | default | meaning |",
            "| --- | --- | --- | --- |",
        ]
        for key in keys:
            out.append(
                f"| `{key.name}` | {schema._describe(key.type)} | {_cell(key.shown_default)} "
                f"| {key.comment.replace('|', '/')} |"
            )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _cell(shown: str) -> str:
    return (
        shown if shown in _COMPUTED.values() or shown == "unset" else f"`{shown.replace('|', '/')}`"
    )
