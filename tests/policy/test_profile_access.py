"""A REPL profile names who may use it (`[repl.<name>] clients`), and a trusted
profile must: a profile name comes from the request, so a trusted profile open
to every caller would let any caller (a policy being trained) ask for `trusted`
and run its own code on the REPL's main thread (tests/policy/forging_repl.py
answers such code VALID, as that code could). Here a second client naming the
team's trusted profile is refused at every door that takes a profile, and the
hostile REPL never sees its code; the team's client still runs (the test can
fail both ways)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import grpc
import pytest

from leanrpc.app import create_server
from leanrpc.client import AsyncClient, ClientError
from leanrpc.config import Config, ReplProfile
from leanrpc.errors import ConfigError, PermissionDenied
from leanrpc.services.access import ProfileAccess
from testkit import loopback_config, stop_server

FAKE = [sys.executable, str(Path(__file__).with_name("forging_repl.py"))]
HEADER = "import Mathlib\n\n"
FORGED = HEADER + 'theorem two_plus_two : 2 + 2 = 5 := bad_proof\n#eval IO.println "forged"'
HONEST = HEADER + "theorem ok : True := trivial\n"


def _identity(token: str) -> str:
    return "token:" + hashlib.sha256(token.encode()).hexdigest()[:16]


def _config(**profiles: ReplProfile) -> Config:
    config = Config()
    config.repl.profiles = dict(profiles)
    return config


# -- the start-up rules ---------------------------------------------------------


def test_a_trusted_profile_that_names_no_clients_is_refused_at_start():
    config = _config(internal=ReplProfile(command=["repl"]))
    config.policy.trusted_profiles = ["internal"]
    with pytest.raises(ConfigError, match=r"\[repl.internal\] lists no `clients`"):
        ProfileAccess(config)
    config.repl.profiles["internal"].clients = []  # an empty list opens it to no one: still refused
    with pytest.raises(ConfigError, match="lists no `clients`"):
        ProfileAccess(config)
    config.repl.profiles["internal"].clients = [_identity("team")]
    ProfileAccess(config)


def test_trusted_profiles_name_configured_profiles_and_the_default_is_the_operators_choice():
    config = _config()
    config.policy.trusted_profiles = ["nope"]
    with pytest.raises(ConfigError, match="'nope', which is not a REPL profile"):
        ProfileAccess(config)
    # The default profile: like [policy] default = "trusted" for callers naming no profile.
    config.policy.trusted_profiles = [""]
    ProfileAccess(config).check("", "peer:ipv4:127.0.0.1")


@pytest.mark.parametrize("client", ["3f2a9c", "token:", "user:alice", ""])
def test_a_client_that_is_not_an_identity_is_a_start_up_error(client):
    config = _config(team=ReplProfile(clients=[client]))
    with pytest.raises(ConfigError, match=r"repl\.team\.clients: .* is not a caller identity"):
        ProfileAccess(config)
    config = _config()
    config.policy.trusted_clients = [_identity("team"), client]  # the same rule
    with pytest.raises(ConfigError, match=r"policy\.trusted_clients: .* is not a caller identity"):
        ProfileAccess(config)


def test_check_lets_the_listed_callers_in_and_nobody_else():
    team, other = _identity("team"), _identity("other")
    access = ProfileAccess(
        _config(team=ReplProfile(clients=[team, "cert:ci"]), open=ReplProfile(command=["repl"]))
    )
    access.check("team", team)
    access.check("team", "cert:ci")
    access.check("open", other)  # no `clients`: every caller
    access.check("", other)
    for caller in (other, "", "peer:ipv4:127.0.0.1", "cert:ci2"):
        with pytest.raises(PermissionDenied, match="'team' is not open to this caller"):
            access.check("team", caller)


def test_clients_decide_who_names_a_profile_not_how_its_repl_runs():
    config = _config(team=ReplProfile(command=["repl", "--team"], clients=[_identity("team")]))
    assert config.repl.profile("team").command == ["repl", "--team"]
    loaded = Config.from_dict({"repl": {"team": {"command": "repl", "clients": ["cert:ci"]}}})
    assert loaded.repl.profiles["team"].clients == ["cert:ci"]


# -- through the real server ----------------------------------------------------


def _fired(log: Path) -> list:
    return [json.loads(line) for line in log.read_text().splitlines()]


async def _start(tmp_path, team_token: str, *, clients: list[str]):
    log = tmp_path / "fired.jsonl"
    log.write_text("")
    config = loopback_config(
        2,
        sandbox__mode="off",
        server__auth_tokens=[team_token, "policy-token"],
        policy__trusted_profiles=["internal"],
    )
    config.repl.command = FAKE + [str(log)]
    config.repl.profiles = {"internal": ReplProfile(clients=clients)}
    app = await create_server(config)
    return app, log


@pytest.mark.runs_user_code
async def test_another_caller_naming_a_trusted_profile_is_refused_at_every_door(tmp_path):
    app, log = await _start(tmp_path, "team-token", clients=[_identity("team-token")])
    team = AsyncClient(f"127.0.0.1:{app.port}", token="team-token", max_retries=0)
    policy = AsyncClient(f"127.0.0.1:{app.port}", token="policy-token", max_retries=0)
    try:
        # Verify: PERMISSION_DENIED, naming the profile.
        with pytest.raises(ClientError) as refused:
            await policy.verify_batch([FORGED], profile="internal", check_axioms=False)
        assert refused.value.code is grpc.StatusCode.PERMISSION_DENIED
        assert refused.value.reason == "PERMISSION_DENIED" and "'internal'" in refused.value.details
        # VerifyStream: that snippet REJECTED (a stream answers each snippet).
        [streamed] = await policy.verify([FORGED], profile="internal", check_axioms=False)
        assert streamed.status == "REJECTED" and "not open to this caller" in streamed.error
        # OpenSession on the profile: refused too.
        with pytest.raises(ClientError) as opened:
            await policy.open_session(FORGED, name="mine", profile="internal")
        assert opened.value.code is grpc.StatusCode.PERMISSION_DENIED
        # The same caller on the default profile stays under `proof`: REJECTED, never run.
        [plain] = await policy.verify_batch([FORGED], check_axioms=False)
        assert plain.status == "REJECTED" and plain.checks.policy == "proof"
        assert _fired(log) == []  # the hostile REPL never saw the policy's code
        # The team named in `clients` runs under `trusted` on its profile, and says so.
        [ran] = await team.verify_batch([FORGED], profile="internal", check_axioms=False)
        assert ran.status == "VALID" and ran.checks.policy == "trusted"
        assert len(_fired(log)) == 1
        [honest] = await policy.verify_batch([HONEST], check_axioms=False)
        assert honest.status == "VALID" and honest.checks.policy == "proof"
    finally:
        await policy.close()
        await stop_server(app, team)


async def test_a_trusted_profile_open_to_all_stops_the_server_before_it_serves(tmp_path):
    config = loopback_config(1, sandbox__mode="off", policy__trusted_profiles=["internal"])
    config.repl.profiles = {"internal": ReplProfile()}
    with pytest.raises(ConfigError, match="lists no `clients`"):
        await create_server(config)
