"""Who may name which REPL profile: the one check, and its start-up rules.

Owns: `ProfileAccess.check(profile, client_id)`, which raises PermissionDenied
when the profile's `clients` (`[repl.<name>] clients`) leave the caller out,
and the config rules it enforces when it is built (ConfigError, so the server
does not start):

* `[policy] trusted_profiles` names only configured profiles;
* a named profile in `trusted_profiles` lists its `clients`. A profile name
  comes from the request, so without the list any caller naming the profile
  would run its code under `trusted`: the request alone would decide, which
  the code policy never allows (docs/SECURITY.md, "Code policy"). The
  default profile "" in `trusted_profiles` is the operator's plain choice,
  the same as `[policy] default = "trusted"` for callers that name no profile;
* each listed client, and each of `[policy] trusted_clients`, is an identity
  as edge/identity.py writes them (`token:`, `cert:` or `peer:` and a name),
  so a typo is a start-up error, not a silent refusal of the team it meant.

Resolution (services/resolve.py) calls `check` once per request, after the
profile is known to exist. May import: leanrpc.config, leanrpc.errors.
"""

from __future__ import annotations

from ..config import Config
from ..errors import ConfigError, PermissionDenied

__all__ = ["IDENTITY_KINDS", "ProfileAccess"]

# The prefixes of the identities edge/identity.py gives callers.
IDENTITY_KINDS = ("token:", "cert:", "peer:")


class ProfileAccess:
    def __init__(self, config: Config) -> None:
        profiles = config.repl.profiles
        self._clients: dict[str, frozenset[str]] = {}
        _check_identities("policy.trusted_clients", config.policy.trusted_clients)
        for name, profile in profiles.items():
            if profile.clients is None:
                continue
            _check_identities(f"repl.{name}.clients", profile.clients)
            self._clients[name] = frozenset(profile.clients)
        for name in config.policy.trusted_profiles:
            if not name:
                continue  # the default profile: the operator's plain choice
            if name not in profiles:
                known = ", ".join(repr(n) for n in sorted(profiles)) or "none"
                raise ConfigError(
                    f"policy.trusted_profiles names {name!r}, which is not a REPL profile "
                    f"(configured: {known})"
                )
            if not profiles[name].clients:
                raise ConfigError(
                    f"policy.trusted_profiles names {name!r}, but [repl.{name}] lists no "
                    "`clients`: any caller naming the profile would run its code under "
                    "`trusted`; list the identities that may (e.g. clients = "
                    '["token:3f2a…"], as the request log names callers)'
                )

    def check(self, profile: str, client_id: str) -> None:
        """PermissionDenied unless `client_id` may name `profile` ("" is open to all)."""
        allowed = self._clients.get(profile)
        if allowed is None or client_id in allowed:
            return
        raise PermissionDenied(
            f"REPL profile {profile!r} is not open to this caller ({client_id or 'anonymous'}); "
            "its `clients` in the server's config name who may use it"
        )


def _check_identities(key: str, clients: list[str]) -> None:
    for client in clients:
        kind = next((k for k in IDENTITY_KINDS if client.startswith(k)), None)
        if kind is None or len(client) == len(kind):
            raise ConfigError(
                f"{key}: {client!r} is not a caller identity "
                f"(one of {', '.join(k + '…' for k in IDENTITY_KINDS)}, as the "
                "request log names callers)"
            )
