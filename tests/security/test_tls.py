"""TLS and mTLS with certificates made here (CA, server for 127.0.0.1, client)."""

from __future__ import annotations

import datetime
import ipaddress

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from leanrpc.client import AsyncClient
from leanrpc.v1 import verifier_pb2 as pb
from security_support import make_config, running_server, stub


def _key_pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert(subject: str, issuer_name, signing_key, public_key, *, ca: bool, usage=None, san=None):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer_name or x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Paths and bytes of a CA, a server cert for 127.0.0.1/localhost, a client cert,
    and a second CA that signed nothing the server trusts."""
    root = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("leanrpc test CA", None, ca_key, ca_key.public_key(), ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert(
        "localhost",
        ca.subject,
        ca_key,
        server_key.public_key(),
        ca=False,
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert(
        "client-1",
        ca.subject,
        ca_key,
        client_key.public_key(),
        ca=False,
        usage=ExtendedKeyUsageOID.CLIENT_AUTH,
    )
    rogue_key = ec.generate_private_key(ec.SECP256R1())
    rogue_ca = _cert("rogue CA", None, rogue_key, rogue_key.public_key(), ca=True)
    rogue_client = _cert(
        "intruder",
        rogue_ca.subject,
        rogue_key,
        client_key.public_key(),
        ca=False,
        usage=ExtendedKeyUsageOID.CLIENT_AUTH,
    )
    pem = lambda c: c.public_bytes(serialization.Encoding.PEM)  # noqa: E731
    files = {"ca.pem": pem(ca), "server.pem": pem(server), "server.key": _key_pem(server_key)}
    for name, data in files.items():
        (root / name).write_bytes(data)
    return {
        "dir": root,
        "ca": pem(ca),
        "client_cert": pem(client),
        "client_key": _key_pem(client_key),
        "rogue_cert": pem(rogue_client),
    }


def _tls_config(pki, *, mtls: bool):
    d = pki["dir"]
    config = make_config(
        server__tls_cert=str(d / "server.pem"), server__tls_key=str(d / "server.key")
    )
    if mtls:
        config.server.tls_client_ca = str(d / "ca.pem")
        config.server.allow_unauthenticated_loopback = False  # client certificates authenticate
    return config


async def _server_info_code(address: str, credentials) -> grpc.StatusCode:
    channel = (
        grpc.aio.secure_channel(address, credentials)
        if credentials
        else grpc.aio.insecure_channel(address)
    )
    async with channel:
        try:
            await stub(channel).GetServerInfo(pb.GetServerInfoRequest(), timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


async def test_tls_serves_encrypted_and_refuses_plaintext(pki, monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(_tls_config(pki, mtls=False)) as app:
        address = f"127.0.0.1:{app.port}"
        assert (
            await _server_info_code(
                address, grpc.ssl_channel_credentials(root_certificates=pki["ca"])
            )
            == grpc.StatusCode.OK
        )
        assert await _server_info_code(address, None) == grpc.StatusCode.UNAVAILABLE
        # A client that trusts some other CA does not accept this server.
        other = _cert(
            "other", None, (k := ec.generate_private_key(ec.SECP256R1())), k.public_key(), ca=True
        )
        other_pem = other.public_bytes(serialization.Encoding.PEM)
        assert (
            await _server_info_code(
                address, grpc.ssl_channel_credentials(root_certificates=other_pem)
            )
            == grpc.StatusCode.UNAVAILABLE
        )


async def test_mtls_requires_a_client_certificate_from_the_ca(pki, monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(_tls_config(pki, mtls=True)) as app:
        address = f"127.0.0.1:{app.port}"
        good = grpc.ssl_channel_credentials(pki["ca"], pki["client_key"], pki["client_cert"])
        assert await _server_info_code(address, good) == grpc.StatusCode.OK
        no_cert = grpc.ssl_channel_credentials(root_certificates=pki["ca"])
        assert await _server_info_code(address, no_cert) == grpc.StatusCode.UNAVAILABLE
        rogue = grpc.ssl_channel_credentials(pki["ca"], pki["client_key"], pki["rogue_cert"])
        assert await _server_info_code(address, rogue) == grpc.StatusCode.UNAVAILABLE
        # The Python client takes the same credentials.
        async with AsyncClient(address, credentials=good, max_retries=0) as client:
            results = await client.verify(["import Mathlib\n\ntheorem t : 1 = 1 := rfl\n"])
        assert [r.status for r in results] == ["VALID"]


async def test_with_mtls_a_caller_is_its_certificates_name(pki, monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(_tls_config(pki, mtls=True)) as app:
        seen: list[str] = []
        run = app.verify.run

        async def spy(request):
            seen.append(request.client_id)
            return await run(request)

        app.verify.run = spy
        good = grpc.ssl_channel_credentials(pki["ca"], pki["client_key"], pki["client_cert"])
        async with AsyncClient(
            f"127.0.0.1:{app.port}", credentials=good, token="made-up", max_retries=0
        ) as client:
            opened = await client.open_session("import Mathlib\n")
            await client.verify_batch(["theorem t : 1 = 1 := rfl"], session=opened.session)
        # The checked certificate names the caller (a made-up bearer does not), and owns the session.
        assert seen == ["cert:client-1"]
        assert app.pool.sessions.get(opened.session, "cert:client-1").name == opened.session
