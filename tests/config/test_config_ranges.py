"""Config values are validated at load: key name and allowed range in one line."""

from __future__ import annotations

import tomllib

import pytest

from leanrpc.config import Config, ConfigError, to_toml
from leanrpc.errors import LeanServiceError, RequestError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[pool]\nworkers = -3\n",
            "config key pool.workers must be an integer number >= 1, not -3",
        ),
        ("[pool]\nworkers = 0\n", "config key pool.workers must be an integer number >= 1, not 0"),
        (
            "[server]\nport = 70000\n",
            "config key server.port must be an integer number from 0 to 65535, not 70000",
        ),
        (
            '[repl]\nincrementality = "maybe"\n',
            "config key repl.incrementality must be one of 'auto', 'on', 'off', not 'maybe'",
        ),
        (
            '[sandbox]\nmode = "chroot"\n',
            "config key sandbox.mode must be one of 'auto', 'unshare', 'off', not 'chroot'",
        ),
        ("[repl]\nenv = { A = 1 }\n", "config key repl.env must be a table of strings"),
        # (max_worker_rss_mb takes any integer: 0 = the machine default, negative = off)
        (
            "[limits]\naddress_space_mb = -1\n",
            "config key limits.address_space_mb must be an integer number >= 0, not -1",
        ),
        (
            "[limits]\nmax_system_memory_percent = 120\n",
            "limits.max_system_memory_percent must be a number from 0 to 100, not 120",
        ),
        ("[pool]\ndefault_timeout_s = 0\n", "pool.default_timeout_s must be a number > 0, not 0"),
        (
            "[formalize]\nmax_batch = -2\n",
            "formalize.max_batch must be an integer number >= 0, not -2",
        ),
        (
            '[pool]\nwarm_headers = ["import Mathlib", 3]\n',
            "pool.warm_headers must be a list of strings; entry 1 is 3",
        ),
        ("[pool]\nworkerz = 2\n", "unknown config key pool.workerz"),
    ],
)
def test_out_of_range_values_are_refused_with_key_and_range(tmp_path, text, expected):
    path = tmp_path / "leanrpc.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        Config.from_toml(path)
    message = str(info.value)
    assert expected in message
    assert "\n" not in message  # one line
    assert isinstance(info.value, LeanServiceError)  # the project's one error tree
    assert not isinstance(info.value, RequestError)  # a bad config is not a bad request


def test_edge_values_inside_the_range_load(tmp_path):
    path = tmp_path / "leanrpc.toml"
    path.write_text(
        '[pool]\nworkers = 1\n[server]\nport = 65535\n[limits]\nmax_worker_rss_mb = 0\n[repl]\nenv = { A = "1" }\n'
    )
    config = Config.from_toml(path)
    assert (config.pool.workers, config.server.port, config.repl.env) == (1, 65535, {"A": "1"})
    assert isinstance(config.pool.default_timeout_s, float)


@pytest.mark.parametrize(
    ("write", "expected"),
    [
        (None, "does not exist"),
        (b"[pool\nworkers = 1\n", "is not valid TOML"),
        (b"\xff\xfe[pool]", "is not UTF-8 text"),
    ],
)
def test_unreadable_files_are_one_line_errors(tmp_path, write, expected):
    path = tmp_path / "leanrpc.toml"
    if write is not None:
        path.write_bytes(write)
    with pytest.raises(ConfigError) as info:
        Config.from_toml(path)
    assert str(path) in str(info.value) and expected in str(info.value)
    assert "\n" not in str(info.value)


def test_to_toml_round_trips_strings_with_newlines_quotes_and_backslashes(tmp_path):
    config = Config()
    config.repl.env = {"MULTI": "line one\nline two", "QUOTE": 'say "hi" \\ bye', "TAB": "a\tb"}
    config.pool.warm_headers = ["import Mathlib\nimport Aesop"]
    config.formalize.default_header = "import Mathlib\n\nopen Nat"
    text = to_toml(config)
    tomllib.loads(text)  # valid TOML (the hand-written writer was not, for "\n")
    path = tmp_path / "leanrpc.toml"
    path.write_text(text)
    assert Config.from_toml(path).to_dict() == config.to_dict()


def test_validated_checks_values_set_after_loading():
    config = Config()
    config.pool.workers = -1
    with pytest.raises(ConfigError, match="pool.workers must be an integer number >= 1"):
        config.validated()
    config.pool.workers = 3
    assert config.validated().pool.workers == 3
