"""docs/CONFIG.md is the schema's reference; the search path and the environment scheme."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from leanrpc.commands import configref
from leanrpc.config import Config, ConfigError, ReplProfile

ROOT = Path(__file__).resolve().parents[2]
ALL_KEYS = [(section, key.name) for section, _kind, keys in configref.sections() for key in keys]


def test_the_reference_page_is_the_schema():
    written = (ROOT / "docs" / "CONFIG.md").read_text()
    assert written == configref.reference_markdown(), (
        f"docs/CONFIG.md differs from the schema in config.py: run `{configref.REGENERATE}`"
    )


def test_every_key_has_a_row_and_the_issue_s_keys_say_what_they_do():
    page = configref.reference_markdown()
    for section, key in ALL_KEYS:
        assert f"## [{section}]" in page and f"| `{key}` |" in page, (section, key)
    rows = {
        line.split("|")[1].strip(): line for line in page.splitlines() if line.startswith("| `")
    }
    assert "NOT_SERVING" in rows["`stuck_after_s`"]
    assert "at startup" in rows["`min_warm`"]
    assert "LEANRPC_SHARED" in page and "benchmarks.load run" in page
    assert "/work" not in page and "venv" not in page  # machine-independent defaults


def test_the_commented_toml_reads_back_as_the_same_config():
    config = Config()
    config.pool.workers = 5
    config.repl.profiles = {"fast": ReplProfile(command=["repl", "--fast"])}
    text = configref.commented_toml(config)
    assert Config.from_dict(tomllib.loads(text)) == config
    assert "# Start this many workers (with no header) at startup." in text


def test_search_path_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    xdg = tmp_path / "xdg" / "leanrpc"
    xdg.mkdir(parents=True)
    (xdg / "leanrpc.toml").write_text("[pool]\nworkers = 3\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert configref.load(None, env)[0].pool.workers == 3
    (tmp_path / "leanrpc.toml").write_text("[pool]\nworkers = 4\n")
    assert configref.load(None, env)[0].pool.workers == 4
    named = tmp_path / "named.toml"
    named.write_text("[pool]\nworkers = 6\n")
    assert configref.load(None, {**env, "LEANRPC_CONFIG": str(named)})[0].pool.workers == 6
    explicit = tmp_path / "explicit.toml"
    explicit.write_text("[pool]\nworkers = 7\n")
    assert configref.load(str(explicit), {**env, "LEANRPC_CONFIG": str(named)}) == (
        Config.from_toml(explicit),
        explicit,
    )
    with pytest.raises(ConfigError, match="config file .*missing.toml does not exist"):
        configref.load(None, {**env, "LEANRPC_CONFIG": str(tmp_path / "missing.toml")})


@pytest.mark.parametrize(("section", "key"), ALL_KEYS)
def test_every_key_can_be_set_from_the_environment(section, key):
    default = getattr(getattr(Config(), section), key)
    value = configref.inline(default)
    if not value:  # None (unset): any string-typed key takes a text
        value = "x"
    name = f"LEANRPC_{section.upper()}__{key.upper()}"
    overrides = configref.env_overrides({name: value})
    assert overrides == {
        section: {key: tomllib.loads(f"v = {value}")["v"] if value != "x" else "x"}
    }
    config, path = configref.load(None, {name: value, "XDG_CONFIG_HOME": "/nonexistent"})
    assert path is None and getattr(getattr(config, section), key) is not None


def test_environment_values_are_toml_else_text_and_errors_name_the_variable():
    env = {
        "LEANRPC_POOL__WORKERS": "8",
        "LEANRPC_SERVER__HOST": "10.0.0.1",
        "LEANRPC_REPL__COMMAND": "lake env repl",
        "LEANRPC_SERVER__AUTH_TOKEN_FILE": "123",
        "LEANRPC_TOKENS": "ignored: no double underscore",
        "XDG_CONFIG_HOME": "/nonexistent",
    }
    config, _ = configref.load(None, env)
    assert (
        config.pool.workers,
        config.server.host,
        config.repl.command,
        config.server.auth_token_file,
    ) == (8, "10.0.0.1", ["lake", "env", "repl"], "123")
    with pytest.raises(
        ConfigError,
        match=r"^config key pool.workers must be an integer number >= 1, not 0 "
        r"\(set by LEANRPC_POOL__WORKERS\)$",
    ):
        configref.load(None, {"LEANRPC_POOL__WORKERS": "0"})
    with pytest.raises(ConfigError, match="LEANRPC_POOL__WORKRS: unknown config key pool.workrs"):
        configref.env_overrides({"LEANRPC_POOL__WORKRS": "3"})
    with pytest.raises(
        ConfigError, match=r"LEANRPC_POLL__WORKERS: unknown config section \[poll\]"
    ):
        configref.env_overrides({"LEANRPC_POLL__WORKERS": "3"})


def test_every_key_has_a_description_in_the_schema_itself():
    """Issue 41 item 13: the meaning of each key is its `msgspec.Meta(description=...)`,
    so none can be empty on the page; the JSON schema msgspec writes carries them too."""
    import msgspec

    missing = [
        f"{section}.{key.name}"
        for section, kind, keys in configref.sections()
        for key in keys
        if not configref.description(kind, key.name).strip()
    ]
    assert missing == [], f"keys without msgspec.Meta(description=...): {missing}"
    page_rows = [
        line for line in configref.reference_markdown().splitlines() if line.startswith("| `")
    ]
    assert len(page_rows) == len(ALL_KEYS)
    assert not [row for row in page_rows if row.rstrip().endswith("|  |")]
    schema = msgspec.json.schema(Config)["$defs"]
    assert schema["AxiomsConfig"]["properties"]["check"]["description"]
    assert schema["JudgeConfig"]["properties"]["timeout_s"]["description"]
    assert schema["FormalizeSection"]["properties"]["max_new_tokens"]["description"]
