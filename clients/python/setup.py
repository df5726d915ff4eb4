"""Builds leanrpc-client: generates its own stubs into leanrpc_client/_v1.

protoc names the stubs' imports after the proto path (`from leanrpc.v1
import verifier_pb2`); they are rewritten to relative imports so the client
needs no `leanrpc` package.
"""

import pathlib
import re

from setuptools import setup

HERE = pathlib.Path(__file__).parent.resolve()
PROTO_ROOT = (HERE / ".." / ".." / "proto").resolve()
OUT = HERE / "leanrpc_client" / "_v1"


def generate_stubs() -> None:
    import grpc_tools
    from grpc_tools import protoc

    staging = HERE / "build" / "stubs"
    staging.mkdir(parents=True, exist_ok=True)
    protos = sorted(
        str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / "leanrpc" / "v1").glob("*.proto")
    )
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={staging}",
        f"--pyi_out={staging}",
        f"--grpc_python_out={staging}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed: " + " ".join(args))
    OUT.mkdir(exist_ok=True)
    for generated in (staging / "leanrpc" / "v1").iterdir():
        text = re.sub(
            r"^from leanrpc\.v1 import", "from . import", generated.read_text(), flags=re.M
        )
        (OUT / generated.name).write_text(text)
    (OUT / "__init__.py").write_text(
        '"""Generated gRPC stubs (built from proto/; do not edit)."""\n'
    )


if (PROTO_ROOT / "leanrpc" / "v1").is_dir():
    generate_stubs()

setup(package_data={"leanrpc_client._v1": ["*.pyi"]})
