"""What each REPL profile's processes can do: the incrementality fork and Elab.async.

Owns: `ProfileFeatures` (one profile's resolved switches) and `Features`
(the table by profile name). A profile's `incrementality` / `elab_async`
"auto" is resolved from that profile's own REPL, never from another's:

    incrementality  "on"/"off" as set; "auto": on when the profile's command
                    line names the fork, else asked of its first REPL that
                    boots (the fork probe, `probe_pending` until then)
    elab_async      "on"/"off" (or true/false) as set; "auto": on for the fork
                    at Lean >= 4.19 (the profile's own Lean version)

and each profile's switches are used for that profile's jobs only. Pure: no
processes, no clock, no asyncio. May import: config, results.
"""

from __future__ import annotations

import dataclasses

from ..config import ReplConfig
from ..results import lean_version_tuple

__all__ = ["Features", "ProfileFeatures"]

# Words in a command line that name the augustepoiroux incrementality fork.
_FORK_MARKS = ("augustepoiroux", "incremental", "--fork")
# Elab.async exists from this Lean version on.
_ELAB_ASYNC_SINCE = (4, 19, 0)


@dataclasses.dataclass
class ProfileFeatures:
    """One profile's switches, as resolved so far."""

    incrementality: bool = False
    elab_async: bool = False  # decided once the profile's Lean version is known
    # "auto" without a telltale command line: its first REPL to boot is asked.
    probe_pending: bool = False
    elab_async_setting: str | bool = "auto"


class Features:
    """The switches of every configured profile ("" = the default)."""

    def __init__(self, repl: ReplConfig) -> None:
        self._by_profile = {name: _initial(repl.profile(name)) for name in repl.profile_names}
        self.incremental_profiles = self._incremental_profiles()

    def _incremental_profiles(self) -> frozenset[str]:
        """The profiles whose jobs may ask for incrementality (routing's snapshot)."""
        return frozenset(name for name, found in self._by_profile.items() if found.incrementality)

    def of(self, profile: str) -> ProfileFeatures:
        """A known profile's switches (KeyError for a name the config lacks)."""
        return self._by_profile[profile]

    def incremental(self, profile: str) -> bool:
        """Whether `profile`'s jobs may ask for incrementality (prefix reuse)."""
        found = self._by_profile.get(profile)
        return found is not None and found.incrementality

    def probe_pending(self, profile: str) -> bool:
        found = self._by_profile.get(profile)
        return found is not None and found.probe_pending

    def learn(self, profile: str, is_fork: bool | None, lean_version: str) -> bool:
        """Takes what a booted REPL of `profile` told: its fork probe answer
        (None when it was not asked) and its Lean version. True when this
        settled the profile's fork question (the first probed boot)."""
        found = self._by_profile[profile]
        settled = found.probe_pending and is_fork is not None
        if settled:
            found.probe_pending = False
            found.incrementality = bool(is_fork)
            self.incremental_profiles = self._incremental_profiles()
        found.elab_async = _wants_elab_async(
            found.elab_async_setting, found.incrementality, lean_version
        )
        return settled


def _initial(repl: ReplConfig) -> ProfileFeatures:
    mode = repl.incrementality
    on = mode == "on" or (mode == "auto" and any(m in " ".join(repl.command) for m in _FORK_MARKS))
    return ProfileFeatures(
        incrementality=on,
        probe_pending=mode == "auto" and not on,
        elab_async_setting=repl.elab_async,
        elab_async=repl.elab_async in (True, "on"),
    )


def _wants_elab_async(setting: str | bool, incrementality: bool, lean_version: str) -> bool:
    if setting in (True, "on"):
        return True
    if setting in (False, "off"):
        return False
    # auto: the fork accepts setOptions; Elab.async exists from Lean 4.19.
    version = lean_version_tuple(lean_version)
    return incrementality and version is not None and version >= _ELAB_ASYNC_SINCE
