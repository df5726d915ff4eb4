"""Settings read from a config section are that section's schema, not copies of it:
the Prover's limits are the `[prover]` struct, the channel's fence settings take
their defaults and values from `[repl]`."""

from __future__ import annotations

from leanrpc.config import Config, ProverConfig, ReplConfig
from leanrpc.services.prover import ProverLimits
from leanrpc.worker.fence import FenceSettings


def test_prover_limits_are_the_prover_section():
    config = Config()
    config.prover.max_states_per_client = 7
    config.prover.pickle = "off"
    limits = ProverLimits.from_config(config)
    assert isinstance(limits, ProverConfig)
    assert (limits.max_states_per_client, limits.pickle) == (7, "off")
    assert ProverLimits() == ProverLimits.from_config(Config())


def test_fence_settings_follow_the_repl_section():
    assert (
        FenceSettings()
        == FenceSettings.from_config(ReplConfig())
        == FenceSettings.from_config(None)
    )
    custom = FenceSettings.from_config(
        ReplConfig(fence="off", fence_audit="on", fence_thread_allowance=3)
    )
    assert (custom.fence, custom.audit, custom.thread_allowance) == (False, "on", 3)
