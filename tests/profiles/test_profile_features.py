"""Fork detection per REPL profile (issue 19 item 6): each profile's
`incrementality` / `elab_async` "auto" is resolved from its own REPL and used
for that profile's jobs only. One profile is the fork, one upstream, one the
fork at a Lean without Elab.async; each REPL records the requests it got."""

from __future__ import annotations

import asyncio
import json
import re

from leanrpc.pool.features import Features
from profiles_support import profiles_config, recording_standin, start, stop

HEADER = "import Mathlib\n\n"


def _requests(path) -> list[dict]:
    """The body commands (the snippets' theorems) a profile's REPLs read;
    probes, canaries, imports, warm-ups and fences are left out."""
    out = []
    for line in path.read_text().splitlines():
        try:
            request = json.loads(line)
        except ValueError:
            continue
        # The snippets' own names only: a canary's drawn name may begin with "t" too.
        if isinstance(request, dict) and re.search(r"\btheorem t\d+ ", request.get("cmd", "")):
            out.append(request)
    return out


async def test_each_profile_resolves_auto_from_its_own_repl(tmp_path):
    records = {name: tmp_path / f"{name or 'default'}.jsonl" for name in ("", "fork", "oldfork")}
    config = profiles_config(
        # Upstream, auto: the probe says "not the fork".
        {
            "command": recording_standin("--lean-version", "4.19.0"),
            "env": {"LEANRPC_RECORD": str(records[""])},
        },
        {
            # The fork with no telltale command line: only its own probe can tell.
            "fork": {
                "command": recording_standin("--lean-version", "4.19.0"),
                "env": {"LEANRPC_RECORD": str(records["fork"]), "LEANRPC_STANDIN_FORK": "1"},
            },
            # The fork at Lean 4.18: incrementality yes, Elab.async no (its own version).
            "oldfork": {
                "command": recording_standin("--lean-version", "4.18.0"),
                "env": {"LEANRPC_RECORD": str(records["oldfork"]), "LEANRPC_STANDIN_FORK": "1"},
            },
        },
        workers=3,
    )
    assert config.repl.incrementality == "auto" and config.repl.elab_async == "auto"
    config.sandbox.mode = "off"  # the recorders write the test's files (a sandbox would hide them)
    app, client = await start(config)
    try:
        features = app.pool.features
        # Before a profile's first boot its "auto" is still open.
        assert features.probe_pending("fork") and features.probe_pending("oldfork")
        codes = [HEADER + f"theorem t{i} (a : Nat) : a + {i} = a + {i} := rfl" for i in range(3)]
        batches = await asyncio.gather(
            *(client.verify_batch(codes, profile=p) for p in ("", "fork", "oldfork"))
        )
        assert [r.status for batch in batches for r in batch] == ["VALID"] * 9

        resolved = {p: (features.of(p).incrementality, features.of(p).elab_async) for p in records}
        assert resolved == {"": (False, False), "fork": (True, True), "oldfork": (True, False)}
        assert not any(features.probe_pending(p) for p in records)
        assert (app.pool.incrementality, app.pool.elab_async) == (False, False)  # the default's

        # Each profile's switches went to its own REPLs only.
        sent = {p: _requests(path) for p, path in records.items()}
        assert {p: len(found) for p, found in sent.items()} == {p: 3 for p in records}
        assert not any("incrementality" in r or "setOptions" in r for r in sent[""])
        assert all(r.get("incrementality") is True for r in sent["fork"])
        assert all(r.get("setOptions") == [[["Elab", "async"], True]] for r in sent["fork"])
        assert all(
            r.get("incrementality") is True and "setOptions" not in r for r in sent["oldfork"]
        )
    finally:
        await stop(app, client)


def test_switches_set_by_hand_or_by_command_line_need_no_probe():
    config = profiles_config(
        {"command": ["repl", "--fork"], "elab_async": "off"},
        {
            "upstream": {"command": ["repl"], "incrementality": "off"},
            "forced": {"command": ["repl"], "incrementality": "on", "elab_async": "on"},
        },
    )
    features = Features(config.repl)
    assert not any(features.probe_pending(p) for p in ("", "upstream", "forced"))
    assert (
        features.incremental("")
        and not features.incremental("upstream")
        and features.incremental("forced")
    )
    # A later boot cannot change a profile set by hand; elab_async follows each setting.
    for profile in ("", "upstream", "forced"):
        assert features.learn(profile, None, "4.20.0") is False
    assert [features.of(p).elab_async for p in ("", "upstream", "forced")] == [False, False, True]
    assert not features.incremental("unknown")
