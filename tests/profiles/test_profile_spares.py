"""Warm spares per REPL profile (issue 19 item 6): the default profile and
every profile with recent traffic keep a spare of their top header while
`pool.warm_spares` allows; a profile whose traffic aged out keeps none, and
its worker makes room (the pool's slots stay shared). Real server on
loopback, real stand-in REPLs."""

from __future__ import annotations

import time

from leanrpc.pool.job import profile_key
from leanrpc.worker.worker import WorkerState
from profiles_support import profiles_config, standin, start, stop
from testkit import wait_until

MATHLIB = "import Mathlib\n\n"
AESOP = "import Aesop\n\n"


def _idle(app) -> set[tuple[str, str]]:
    """(profile, header key) of every idle worker holding a header."""
    return {
        (w.profile, w.import_key)
        for w in app.pool.workers
        if w.state is WorkerState.IDLE and w.import_key
    }


async def test_spares_follow_each_profiles_demand():
    config = profiles_config(
        {"command": standin("--lean-version", "4.19.0")},
        {"legacy": {"command": standin("--lean-version", "4.9.0")}},
        workers=2,
        warm_spares=2,
        max_headers_per_worker=1,
        spare_profile_window_s=600.0,
    )
    app, client = await start(config)
    legacy_key = profile_key("legacy", "import Mathlib")
    try:
        [old] = await client.verify_batch([MATHLIB + "theorem l : 1 = 1 := rfl"], profile="legacy")
        assert old.status == "VALID" and "4.9.0" in old.verifier_description
        # The default profile is busier, with two headers: by use alone both
        # spares would be the default's (Mathlib and Aesop).
        for i in range(3):
            [r] = await client.verify_batch([MATHLIB + f"theorem m{i} : {i} = {i} := rfl"])
            assert r.status == "VALID"
        for i in range(2):
            [r] = await client.verify_batch([AESOP + f"theorem a{i} : True := trivial"])
            assert r.status == "VALID"
        targets = app.pool.supervisor.spare_targets(2, time.monotonic())
        assert targets == {"import Mathlib": 1, legacy_key: 1}
        # One spare for each profile with recent traffic: the default's top header and legacy's.
        await wait_until(
            lambda: _idle(app) == {("", "import Mathlib"), ("legacy", legacy_key)},
            60,
            f"one spare per profile (idle: {_idle(app)})",
        )
        assert app.pool.stats.spares_started >= 1
        assert len([w for w in app.pool.workers if w.alive]) <= 2

        # legacy's traffic ages out: its worker makes room for the default's next header.
        app.pool.config.pool.spare_profile_window_s = 0.0
        assert app.pool.supervisor.spare_targets(2, time.monotonic() + 1) == {
            "import Mathlib": 1,
            "import Aesop": 1,
        }
        await wait_until(
            lambda: _idle(app) == {("", "import Mathlib"), ("", "import Aesop")},
            60,
            f"the default profile's two spares (idle: {_idle(app)})",
        )
        assert not [w for w in app.pool.workers if w.alive and w.profile == "legacy"]

        # legacy traffic again: it is served, and keeps a spare once more.
        app.pool.config.pool.spare_profile_window_s = 600.0
        [back] = await client.verify_batch(
            [MATHLIB + "theorem l2 : 2 = 2 := rfl"], profile="legacy"
        )
        assert back.status == "VALID" and "4.9.0" in back.verifier_description
        await wait_until(
            lambda: ("legacy", legacy_key) in _idle(app) and ("", "import Mathlib") in _idle(app),
            60,
            f"legacy's spare back next to the default's (idle: {_idle(app)})",
        )
    finally:
        await stop(app, client)


async def test_one_spare_goes_to_the_default_profile_first():
    config = profiles_config(
        {"command": standin("--lean-version", "4.19.0")},
        {"legacy": {"command": standin("--lean-version", "4.9.0")}},
        workers=2,
        warm_spares=1,
        max_headers_per_worker=1,
    )
    app, client = await start(config)
    try:
        [r] = await client.verify_batch([MATHLIB + "theorem m : 1 = 1 := rfl"])
        assert r.status == "VALID"
        for i in range(3):  # legacy is used more, and more recently
            [r] = await client.verify_batch(
                [MATHLIB + f"theorem l{i} : 1 = 1 := rfl"], profile="legacy"
            )
            assert r.status == "VALID"
        assert app.pool.supervisor.spare_targets(1, time.monotonic()) == {"import Mathlib": 1}
    finally:
        await stop(app, client)
