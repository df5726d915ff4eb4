"""One typed, validated configuration object, loadable from TOML and flags.

Owns: the `Config` schema (sections as msgspec Structs whose `Meta`
constraints are the allowed ranges), loading (`Config.from_toml`,
`Config.from_dict`) with one-line errors that name the key and what it
allows, and writing (`to_toml`, through tomli-w). The sections themselves
are in leanrpc.config.sections. May import: errors, formalize.config (the
`[formalize]` keys mirror FormalizeConfig).

Every knob has a default that works on the embedded stand-in REPL, so
`leanrpc serve` with no configuration runs. A real Lean setup changes only
`[repl]` (see README, "Real Lean"). To add a knob, add a field to a section
with its type (use the constrained aliases below for ranges) and default.
"""

from __future__ import annotations

import difflib
import os
import shlex
import tomllib
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import tomli_w

from ..errors import ConfigError
from ..formalize.config import FormalizeConfig  # noqa: F401 (re-exported)
from .sections import (  # noqa: F401 (the public names of leanrpc.config)
    AxiomsConfig,
    CacheConfig,
    CanaryConfig,
    FormalizeSection,
    GatewayConfig,
    JudgeConfig,
    LimitsConfig,
    McpConfig,
    MemoryConfig,
    NonNegativeFloat,
    NonNegativeInt,
    OnOffAuto,
    Percent,
    PolicyConfig,
    PoolConfig,
    Port,
    PositiveFloat,
    PositiveInt,
    ProverConfig,
    ReplConfig,
    ReplProfile,
    SandboxConfig,
    ServerConfig,
    SessionsConfig,
    _default_repl_command,
    _formalize_section,
    _Section,
    usable_cores,
)


class Config(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    repl: ReplConfig = msgspec.field(default_factory=ReplConfig)
    limits: LimitsConfig = msgspec.field(default_factory=LimitsConfig)
    pool: PoolConfig = msgspec.field(default_factory=PoolConfig)
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    sandbox: SandboxConfig = msgspec.field(default_factory=SandboxConfig)
    gateway: GatewayConfig = msgspec.field(default_factory=GatewayConfig)
    cache: CacheConfig = msgspec.field(default_factory=CacheConfig)
    formalize: FormalizeSection = msgspec.field(default_factory=FormalizeSection)  # type: ignore[valid-type]
    prover: ProverConfig = msgspec.field(default_factory=ProverConfig)
    judge: JudgeConfig = msgspec.field(default_factory=JudgeConfig)
    sessions: SessionsConfig = msgspec.field(default_factory=SessionsConfig)
    axioms: AxiomsConfig = msgspec.field(default_factory=AxiomsConfig)
    policy: PolicyConfig = msgspec.field(default_factory=PolicyConfig)
    mcp: McpConfig = msgspec.field(default_factory=McpConfig)
    canary: CanaryConfig = msgspec.field(default_factory=CanaryConfig)
    memory: MemoryConfig = msgspec.field(default_factory=MemoryConfig)

    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> "Config":
        """Loads and validates a TOML file; ConfigError names the file and the key."""
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except IsADirectoryError:
            raise ConfigError(f"config file {path} is a folder") from None
        except PermissionError:
            raise ConfigError(f"config file {path} is not readable (permission denied)") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config file {path} is not UTF-8 text") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
        config = cls.from_dict(data)
        for repl in (config.repl, *config.repl.profiles.values()):
            if repl.cwd:
                repl.cwd = str((Path(path).parent / repl.cwd).resolve())
        return config

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Config":
        """Validates a {section: {key: value}} mapping into a Config. Every
        unknown section and key is named at once, with the one probably meant."""
        unknown = []
        for section_name, section_data in data.items():
            if section_name not in cls.__struct_fields__:
                unknown.append(
                    f"unknown config section [{section_name}]"
                    f"{_meant(section_name, cls.__struct_fields__, '[{}]')} "
                    f"(known: {', '.join(cls.__struct_fields__)})"
                )
                continue
            if not isinstance(section_data, dict):
                unknown.append(
                    f"config section [{section_name}] must be a table, not {_show(section_data)}"
                )
                continue
            if section_name != "repl":  # [repl.<profile>] tables are profiles
                keys = type(getattr(cls(), section_name)).__struct_fields__
                unknown += [
                    f"unknown config key {section_name}.{key}"
                    f"{_meant(key, keys, section_name + '.{}')}"
                    for key in section_data
                    if key not in keys
                ]
        if unknown:  # with every wrong value among the known keys
            raise ConfigError("; ".join(unknown + _every_error(cls, data)))
        repl = data.get("repl")
        if isinstance(repl, dict):
            data = {**data, "repl": _gather_profiles(repl)}
        try:
            return msgspec.convert(data, cls, strict=True)
        except msgspec.ValidationError as exc:
            raise ConfigError("; ".join(_every_error(cls, data) or [_explain(exc, data)])) from None

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    def validated(self) -> "Config":
        """A checked copy (for values set from flags or code after loading)."""
        return type(self).from_dict(self.to_dict())


def _gather_profiles(repl: dict[str, Any]) -> dict[str, Any]:
    """`[repl.<name>]` tables (any table that is not a `[repl]` key) move
    under `profiles`; a command given as one string is split like a shell."""
    plain = {
        k: v
        for k, v in repl.items()
        if k in ReplConfig.__struct_fields__ or not isinstance(v, dict)
    }
    named = {k: v for k, v in repl.items() if k not in plain}
    if named:
        profiles = plain.get("profiles")
        profiles = dict(profiles) if isinstance(profiles, dict) else {}
        for name in named:
            if name in profiles:
                raise ConfigError(
                    f"REPL profile {name!r} is given twice ([repl.{name}] and [repl.profiles.{name}])"
                )
        plain["profiles"] = {**profiles, **named}
    if isinstance(plain.get("command"), str):
        plain["command"] = shlex.split(plain["command"])
    if isinstance(plain.get("profiles"), dict):
        plain["profiles"] = {
            name: (
                {**table, "command": shlex.split(table["command"])}
                if isinstance(table, dict) and isinstance(table.get("command"), str)
                else table
            )
            for name, table in plain["profiles"].items()
        }
    return plain


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value


def to_toml(config: Config) -> str:
    """Renders a config as TOML (used by `leanrpc setup`); None values are left out."""
    return tomli_w.dumps(_drop_none(config.to_dict()))


# ---- one-line errors: the key, what it allows, what it got -----------------


def _every_error(cls: type[Config], data: dict[str, Any]) -> list[str]:
    """Every known key whose value is wrong, each named as `_explain` names one.

    msgspec stops at the first error, so each key is converted alone (the
    other keys at their defaults). Only errors at that key's own path are
    kept: a rule across keys of a section (checked with all of them) is
    reported by the whole conversion once these are fixed."""
    problems = []
    for section_name, section_data in data.items():
        if section_name not in cls.__struct_fields__ or not isinstance(section_data, dict):
            continue
        if section_name == "repl":  # [repl.<name>] tables are profiles (gathering twice is one)
            section_data = _gather_profiles(section_data)
        known = type(getattr(cls(), section_name)).__struct_fields__
        for key, value in section_data.items():
            if key not in known:
                continue
            one = {section_name: {key: value}}
            try:
                msgspec.convert(one, cls, strict=True)
            except msgspec.ValidationError as exc:
                if f"`$.{section_name}.{key}" in str(exc):
                    problems.append(_explain(exc, one))
    return problems


def _meant(name: str, known, shape: str) -> str:
    """ " (did you mean pool.workers?)" for a near miss, else ""."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {shape.format(close[0])}?)" if close else ""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _explain(exc: msgspec.ValidationError, data: dict[str, Any]) -> str:
    message = str(exc)
    reason, _, where = message.rpartition(" - at `$")
    path = [p for p in where.rstrip("`").replace("[", ".").replace("]", "").split(".") if p]
    if not path:
        return f"invalid config: {message}"
    section, *rest = path
    if reason.startswith("Object contains unknown field"):
        return f"unknown config key {section}.{reason.split('`')[1]}"
    if not rest:
        return f"config section [{section}]: {reason}"
    key = rest[0]
    value: Any = data.get(section, {}).get(key)
    name = f"{section}.{key}"
    field_type = typing.get_type_hints(type(getattr(Config(), section)), include_extras=True).get(
        key
    )
    allowed = _describe(field_type) if field_type is not None else reason
    if len(rest) > 1:  # inside a list or table: name the entry
        inner = value
        for part in rest[1:]:
            inner = (
                inner[int(part)]
                if isinstance(inner, list) and part.isdigit()
                else (inner or {}).get(part)
                if isinstance(inner, dict)
                else None
            )
        return f"config key {name} must be {allowed}; entry {'.'.join(rest[1:])} is {_show(inner)}"
    return f"config key {name} must be {allowed}, not {_show(value)}"


def _describe(kind: Any) -> str:
    """Words for a field type, ranges included: 'an integer number >= 1'."""
    origin = typing.get_origin(kind)
    if origin is Annotated:
        base, *metas = typing.get_args(kind)
        bounds = []
        for meta in metas:
            if isinstance(meta, msgspec.Meta):
                if meta.ge is not None and meta.le is not None:
                    bounds.append(f"from {meta.ge} to {meta.le}")
                else:
                    for op, bound in (
                        (">=", meta.ge),
                        (">", meta.gt),
                        ("<=", meta.le),
                        ("<", meta.lt),
                    ):
                        if bound is not None:
                            bounds.append(f"{op} {bound}")
        return " ".join([_describe(base), *bounds])
    if origin is Literal:
        return "one of " + ", ".join(repr(v) for v in typing.get_args(kind))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        parts = [_describe(a) for a in typing.get_args(kind) if a is not type(None)]
        return " or ".join(parts)
    if origin is list:
        return "a list of strings" if typing.get_args(kind) == (str,) else "a list"
    if origin is dict:
        return (
            'a table of strings (key = "value")'
            if typing.get_args(kind) == (str, str)
            else "a table"
        )
    return {
        bool: "a boolean (true or false)",
        int: "an integer number",
        float: "a number",
        str: "a string",
    }.get(kind, getattr(kind, "__name__", str(kind)))


def check_private_file(path: str, what: str, error: type[Exception] = ConfigError) -> None:
    """`error` unless `path` can be read by its owner only (token files, cache secrets)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise error(f"cannot read {what} {path!r}: {exc.strerror}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise error(
            f"{what} {path!r} is readable by group or others (mode {stat.S_IMODE(mode):04o}); "
            f"run chmod 600 {path!r}"
        )
