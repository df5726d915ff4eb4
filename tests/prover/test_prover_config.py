"""The `[prover]` config section: ranges checked at load, values reach the service's limits."""

from __future__ import annotations

import pytest

from leanrpc.config import Config, ConfigError, ProverConfig, to_toml
from leanrpc.errors import RequestError
from leanrpc.services.prover import ProverLimits


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[prover]\nmax_states_per_client = 0\n",
            "prover.max_states_per_client must be an integer number from 1",
        ),
        ("[prover]\ndefault_ttl_s = 0\n", "prover.default_ttl_s must be a number"),
        (
            "[prover]\nmax_tactic_chars = -5\n",
            "prover.max_tactic_chars must be an integer number from 1",
        ),
        ("[prover]\nttl = 3\n", "unknown config key prover.ttl"),
    ],
)
def test_bad_prover_keys_are_refused_with_their_name(tmp_path, text, expected):
    path = tmp_path / "leanrpc.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        Config.from_toml(path)
    assert expected in str(info.value)


def test_prover_keys_become_the_limits_and_round_trip(tmp_path):
    path = tmp_path / "leanrpc.toml"
    path.write_text(
        "[prover]\nmax_states_per_client = 7\ndefault_ttl_s = 30\nmax_ttl_s = 60\nmax_tactic_chars = 100\n"
    )
    config = Config.from_toml(path)
    limits = ProverLimits.from_config(config)
    assert (
        limits.max_states_per_client,
        limits.default_ttl_s,
        limits.max_ttl_s,
        limits.max_tactic_chars,
    ) == (7, 30, 60, 100)
    # The limits are the `[prover]` schema itself (one source), not a copy of it.
    assert issubclass(ProverLimits, ProverConfig)
    assert ProverLimits.__struct_fields__ == ProverConfig.__struct_fields__
    assert ProverLimits() == ProverLimits.from_config(Config())
    again = tmp_path / "again.toml"
    again.write_text(to_toml(config))
    assert Config.from_toml(again) == config


def test_default_ttl_over_max_ttl_is_refused():
    config = Config()
    config.prover.default_ttl_s, config.prover.max_ttl_s = 100.0, 50.0
    with pytest.raises(
        RequestError, match="prover.default_ttl_s 100.0 is over prover.max_ttl_s 50.0"
    ):
        ProverLimits.from_config(config)
