"""Who a caller is: one rule, in one place, for every door.

Every door (the Verifier's RPCs and sessions, the Prover, Extract, the REST
gateway, the request log and the per-client interceptor) names its caller
here, and everything keyed on a caller uses that name: fair admission in the
queue, per-client limits (calls in flight, sessions, proof states, the
memory their commands hold) and ownership (a session or a proof state
belongs to the identity that created it).

- When the server checks tokens (edge.auth.load_tokens found some: the
  AuthInterceptor and the gateway refuse every other caller), a caller is
  its token: ``token:`` and 16 hex digits of the token's SHA-256. The REST
  gateway's ``Authorization`` with or without the ``Bearer`` prefix names
  the same identity as gRPC's ``authorization: Bearer``.
- Otherwise, on a gRPC call whose client certificate the server checked
  (mTLS, `server.tls_client_ca`: the server requires one from that CA), a
  caller is its certificate's common name: ``cert:client-1``.
- Otherwise (loopback without tokens) a caller is its peer host, without the
  port: ``peer:ipv4:127.0.0.1`` (one client, many connections, on gRPC and
  REST alike). A bearer header is then ignored: a made-up token buys no new
  identity.

May import: leanrpc.config (through edge.auth; nothing of gRPC's or aiohttp's).
"""

from __future__ import annotations

import dataclasses
import hashlib

from ..config import ServerConfig
from .auth import authorization_values, load_tokens

__all__ = ["CallerIdentity", "client_key", "peer_key"]


def client_key(metadata, peer: str, *, tokens_checked: bool) -> str:
    """The identity of a call with `metadata` from `peer` (a gRPC peer string)."""
    values = authorization_values(metadata)
    header = values[0] if len(values) == 1 else ""
    if tokens_checked and header.startswith("Bearer "):
        return "token:" + hashlib.sha256(header[len("Bearer ") :].strip().encode()).hexdigest()[:16]
    return peer_key(peer)


def peer_key(peer: str) -> str:
    """ "ipv4:127.0.0.1:53412" -> "peer:ipv4:127.0.0.1": the host, not the port."""
    if peer.startswith(("ipv4:", "ipv6:")) and peer.count(":") >= 2:
        return "peer:" + peer.rpartition(":")[0]
    return "peer:" + peer


def _grpc_peer(remote: str | None) -> str:
    """aiohttp's `request.remote` written as gRPC writes a peer (port 0)."""
    if not remote:
        return "unix:"
    if ":" in remote:
        return f"ipv6:[{remote.strip('[]')}]:0"
    return f"ipv4:{remote}:0"


def _certificate_name(context) -> str:
    """``cert:<common name>`` of the client certificate gRPC verified, "" when none."""
    try:
        auth = context.auth_context() or {}
    except Exception:  # noqa: BLE001 - a context without transport security
        return ""
    names = auth.get("x509_common_name") or ()
    if names:
        return "cert:" + names[0].decode("utf-8", "replace")
    pem = auth.get("x509_pem_cert") or ()
    return "cert:" + hashlib.sha256(pem[0]).hexdigest()[:16] if pem else ""


@dataclasses.dataclass(frozen=True)
class CallerIdentity:
    """The rule with the server's one fact: whether tokens are checked."""

    tokens_checked: bool

    @classmethod
    def for_server(cls, server: ServerConfig) -> "CallerIdentity":
        return cls(tokens_checked=bool(load_tokens(server)))

    def of_call(self, context) -> str:
        """A gRPC servicer context's caller (interceptors pass theirs too)."""
        if not self.tokens_checked:
            certified = _certificate_name(context)
            if certified:
                return certified
        return self.of_metadata(context.invocation_metadata(), context.peer() or "")

    def of_metadata(self, metadata, peer: str) -> str:
        """An interceptor's caller (handler_call_details' metadata, context.peer())."""
        return client_key(metadata, peer or "", tokens_checked=self.tokens_checked)

    def of_http(self, authorization: str | None, remote: str | None) -> str:
        """A REST caller: its `Authorization` header (Kimina's form: the
        "Bearer " prefix is optional) and aiohttp's `request.remote`."""
        header = authorization or ""
        if header and not header.startswith("Bearer "):
            header = "Bearer " + header
        metadata = (("authorization", header),) if header else ()
        return self.of_metadata(metadata, _grpc_peer(remote))
