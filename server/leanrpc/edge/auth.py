"""Access policy at the edge: tokens, who a caller is, what may stay public.

The tokens come from the config, a token file and an environment variable
(`load_tokens`); a token file readable by group or others refuses to start
(as ssh does with keys). The interceptors that enforce the policy, and the
startup check of what guards the server, are in edge/interceptors/auth.py;
the REST gateway uses the same checks (`bearer_token_valid`). Who a caller
is, once it is let in, is edge/identity.py (the one rule for every door).

Owns: the token list, bearer-token checks, the public methods.
May import: leanrpc.config, leanrpc.errors (nothing of gRPC's).
"""

from __future__ import annotations

import hmac
import os

from ..config import ServerConfig, check_private_file
from ..errors import ConfigError

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


class AccessConfigError(ConfigError):
    """The server's access settings are unsafe or unreadable; it will not start."""


# Health and reflection stay public so load balancers and grpcurl work.
PUBLIC_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def load_tokens(server: ServerConfig) -> list[str]:
    """Tokens from the config, `auth_token_file` (one per line, # comments) and
    `auth_token_env` (comma-separated)."""
    tokens = [t for t in server.auth_tokens if t]
    if server.auth_token_file:
        check_private(server.auth_token_file, "server.auth_token_file")
        try:
            with open(server.auth_token_file, encoding="utf-8") as f:
                tokens += [line.strip() for line in f if line.strip() and not line.startswith("#")]
        except OSError as exc:
            raise AccessConfigError(
                f"cannot read server.auth_token_file {server.auth_token_file!r}: {exc.strerror}"
            ) from exc
    if server.auth_token_env:
        tokens += [
            t.strip() for t in os.environ.get(server.auth_token_env, "").split(",") if t.strip()
        ]
    return tokens


def check_private(path: str, what: str) -> None:
    """AccessConfigError unless `path` is readable by its owner only."""
    check_private_file(path, what, AccessConfigError)


def authorization_values(metadata) -> list[str]:
    return [value for key, value in (metadata or ()) if key == "authorization"]


def bearer_token_valid(header: str | None, tokens: list[bytes]) -> bool:
    """Whether `Bearer <token>` names one of `tokens` (shared by gRPC and the REST gateway)."""
    if not header or not header.startswith("Bearer "):
        return False
    presented = header[len("Bearer ") :].strip().encode()
    # Compare against every token in constant time.
    return any(hmac.compare_digest(presented, token) for token in tokens)


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS


def refuse_open_plain_http(server: ServerConfig, host: str, door: str) -> None:
    """A plain-HTTP door (`door`: "the REST gateway", "the MCP door") refuses to
    serve a non-loopback host without tokens: AccessConfigError naming how to set them."""
    if load_tokens(server):
        return
    if not (server.allow_unauthenticated_loopback and is_loopback(host)):
        raise AccessConfigError(
            f"refusing to serve {door} on {host} without authentication: set "
            f"server.auth_tokens, server.auth_token_file or ${server.auth_token_env}"
        )
