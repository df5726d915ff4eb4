"""How much the exchange channel (worker/channel.py) checks: the `[repl]` fence keys.

Owns: `FenceSettings` (the fence on or off, the /proc audit's mode, the thread allowance
and the settle wait). Names, defaults and bounds of the config keys are the schema's
(config ReplConfig), read from it here: one source. May import: leanrpc.config.
"""

from __future__ import annotations

import dataclasses

from ..config import ReplConfig

__all__ = ["FenceSettings"]

_REPL_SCHEMA = ReplConfig()  # the `[repl]` defaults: FenceSettings' own come from here (one source)


@dataclasses.dataclass
class FenceSettings:
    """How much the channel checks: the config `[repl]` fence keys (ReplConfig
    `fence`, `fence_audit`, `fence_thread_allowance`: names, defaults and
    bounds are the schema's) plus the settle wait, which is no config key."""

    fence: bool = _REPL_SCHEMA.fence != "off"  # follow each command by a nonce fence
    audit: str = _REPL_SCHEMA.fence_audit  # "on": required; "auto": when /proc is readable; "off"
    thread_allowance: int = (
        _REPL_SCHEMA.fence_thread_allowance
    )  # threads over the warm-up count (Lean's task pool)
    # How long the main thread may take to get back to reading its input. On a
    # loaded 2-core box a few seconds happen (seen: 2 s poisoned dozens of
    # healthy workers); a thief is caught on the first snapshot regardless, so
    # a long wait costs nothing but time on a REPL that is really stuck.
    settle_s: float = 30.0

    @classmethod
    def from_config(cls, repl_config: ReplConfig | None) -> "FenceSettings":
        if repl_config is None:
            return cls()
        return cls(
            fence=repl_config.fence != "off",
            audit=repl_config.fence_audit,
            thread_allowance=repl_config.fence_thread_allowance,
        )
