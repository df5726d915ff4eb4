"""TOML configuration: round trip, clear errors, and the [formalize] mapping."""

from __future__ import annotations

import dataclasses

import pytest

from leanrpc.config import Config, FormalizeSection, to_toml
from leanrpc.edge.formalizer import formalize_config_from
from leanrpc.errors import ConfigError
from leanrpc.formalize.config import FormalizeConfig


def _custom_config(tmp_path) -> Config:
    config = Config()
    config.repl.command = ["lake", "env", "/opt/repl with space/bin/repl"]
    config.repl.cwd = str(tmp_path / "proj")
    config.repl.env = {"LEAN_PATH": "/x:/y", "QUOTE": 'a "b" \\ c'}
    config.repl.incrementality = "on"
    config.limits.max_worker_rss_mb = 16000
    config.limits.max_system_memory_percent = 85.5
    config.pool.workers = 3
    config.pool.warm_headers = ["import Mathlib", "import Aesop"]
    config.pool.default_timeout_s = 12.5
    config.server.port = 0
    config.server.auth_tokens = ["tok-1", "tok-2"]
    config.formalize.model_dir = "/models/qwen3-moe"
    config.formalize.adapter_dirs = ["/adapters/a", "/adapters/b"]
    config.formalize.top_k = 20
    config.formalize.repetition_penalty = 1.05
    config.formalize.mathlib_names_path = ""
    return config


def test_toml_round_trip(tmp_path):
    config = _custom_config(tmp_path)
    path = tmp_path / "leanrpc.toml"
    path.write_text(to_toml(config))
    assert Config.from_toml(path).to_dict() == config.to_dict()
    # Defaults too (cwd None is left out and comes back None).
    path.write_text(to_toml(Config()))
    assert Config.from_toml(path).to_dict() == Config().to_dict()


def test_string_or_bool_key_takes_both(tmp_path):
    path = tmp_path / "leanrpc.toml"
    path.write_text("[repl]\nelab_async = true\n")
    assert Config.from_toml(path).repl.elab_async is True
    path.write_text('[repl]\nelab_async = "off"\n')
    assert Config.from_toml(path).repl.elab_async == "off"


def test_relative_cwd_is_resolved_against_the_file(tmp_path):
    path = tmp_path / "conf" / "leanrpc.toml"
    path.parent.mkdir()
    path.write_text('[repl]\ncwd = "../proj"\ncommand = "lake env repl"\n')
    config = Config.from_toml(path)
    assert config.repl.cwd == str(tmp_path / "proj")
    assert config.repl.command == ["lake", "env", "repl"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[nope]\nx = 1\n", ["unknown config section [nope]"]),
        ("[pool]\nworkerz = 2\n", ["unknown config key pool.workerz"]),
        ("pool = 3\n", ["[pool]", "table"]),
        ('[pool]\nworkers = "four"\n', ["pool.workers", "number"]),
        ("[pool]\nworkers = 2.5\n", ["pool.workers", "integer"]),
        (
            '[server]\nallow_unauthenticated_loopback = "yes"\n',
            ["server.allow_unauthenticated_loopback", "boolean"],
        ),
        ("[server]\nhost = 5\n", ["server.host", "string"]),
        ('[pool]\nwarm_headers = "import Mathlib"\n', ["pool.warm_headers", "list of strings"]),
        ("[repl]\ncwd = 1\n", ["repl.cwd", "string"]),
        ('[repl]\nenv = "A=1"\n', ["repl.env", "table"]),
        ("[formalize]\ntop_k = true\n", ["formalize.top_k", "number"]),
    ],
)
def test_bad_config_raises_clear_error(tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:  # a config error, not a bad request (issue 27)
        Config.from_toml(path)
    for word in words:
        assert word in str(info.value)


def test_formalize_section_covers_formalize_config():
    section_fields = set(FormalizeSection.__struct_fields__)
    config_fields = {f.name for f in dataclasses.fields(FormalizeConfig)}
    assert section_fields == config_fields
    # Same defaults ("" for None), so an empty [formalize] changes nothing.
    assert formalize_config_from(FormalizeSection()) == FormalizeConfig()
    # Every key reaches FormalizeConfig, from TOML through the mapping.
    section = FormalizeSection(
        model_dir="/m",
        adapter_dirs=["/a"],
        tokenizer_dir="/t",
        device="cpu",
        quantize=False,
        compute_dtype="float32",
        max_batch=2,
        max_new_tokens=33,
        max_prompt_tokens=1000,
        top_k=20,
        repetition_penalty=1.05,
        default_max_iterations=3,
        max_iterations_limit=7,
        default_header="import Aesop",
        error_feedback_chars=99,
        mathlib_names_path="",
        retrieval_top_k=4,
        retrieval_default=True,
        did_you_mean_k=2,
        max_jobs_per_stream=9,
    )
    mapped = formalize_config_from(section)
    for name in config_fields:
        expected = getattr(section, name)
        assert getattr(mapped, name) == (None if expected == "" else expected), name
    assert mapped.mathlib_names_path is None and not mapped.names_available()
    mapped.validate()


def test_mathlib_names_auto_follows_env_then_checkout(monkeypatch, tmp_path):
    from leanrpc.formalize import config as formalize_config

    names = tmp_path / "names.tsv"
    names.write_text("Nat.add_comm\tMathlib.Foo\n")
    monkeypatch.setenv(formalize_config.MATHLIB_NAMES_ENV, str(names))
    assert formalize_config_from(FormalizeSection()).mathlib_names_path == str(names)
    monkeypatch.delenv(formalize_config.MATHLIB_NAMES_ENV)
    monkeypatch.setattr(formalize_config, "_CHECKOUT_NAMES", tmp_path / "absent.tsv")
    assert formalize_config_from(FormalizeSection()).mathlib_names_path is None
    assert formalize_config_from(FormalizeSection(mathlib_names_path="")).mathlib_names_path is None
