"""Issue 25 item 6: a Lean before a published kernel soundness fix is named, in the identity and by doctor."""

import pytest

from leanrpc.commands.doctor import WARN, run_doctor
from leanrpc.config import Config, ReplConfig
from leanrpc.repl.probes import soundness_warning
from leanrpc.worker.identity import identity_from_probe


@pytest.mark.parametrize(
    "version, missing",
    [
        ("v4.19.0", "v4.32.1"),
        ("v4.32.0", "v4.32.1"),
        ("4.32.1-rc2", "v4.32.1"),
        ("v4.33.0", "v4.33.1"),
        ("v4.34.0-rc1", "v4.34.0"),
        ("v4.32.1", ""),
        ("v4.32.2", ""),
        ("v4.33.1", ""),
        ("v4.34.0", ""),
        ("v4.40.3", ""),
        ("v5.0.0", ""),
        ("", ""),
        ("not a version", ""),
    ],
)
def test_the_missing_fix_is_named(version, missing):
    warning = soundness_warning(version)
    if missing:
        assert f"in {missing};" in warning and "soundness" in warning
    else:
        assert warning == ""


def test_the_identity_carries_the_warning():
    old = identity_from_probe("4.33.0", ReplConfig(command=["lake", "env", "repl"]))
    assert old.kind == "lean" and "v4.33.1" in old.warning
    fixed = identity_from_probe("4.34.0", ReplConfig(command=["lake", "env", "repl"]))
    assert fixed.warning == ""
    # The configured version wins over the probe's, as for lean_version itself.
    pinned = identity_from_probe("4.34.0", ReplConfig(command=["repl"], lean_version="v4.32.0"))
    assert "v4.32.1" in pinned.warning


async def test_doctor_says_which_fix_is_missing():
    config = Config()
    config.repl.lean_version = "v4.33.0"  # the stand-in emulates what it is told
    report = await run_doctor(config, header="", report=lambda _line: None)
    soundness = next(c for c in report.checks if c.name == "soundness")
    assert soundness.outcome == WARN and "v4.33.1" in soundness.detail
    config.repl.lean_version = "v4.34.0"
    report = await run_doctor(config, header="", report=lambda _line: None)
    assert not any(c.name == "soundness" for c in report.checks)
