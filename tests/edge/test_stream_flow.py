"""Per-stream flow control: a stream that does not read its answers stops
having its requests read (bounded buffers), and stalls only itself."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from leanrpc.app import create_server
from leanrpc.v1 import verifier_pb2 as pb
from verify_support import small_config

pytestmark = pytest.mark.timeout(120)

# Each answer carries the 64 KB string back (#eval), so answers fill the transport.
CODE = 'import Mathlib\n\ntheorem t{i} : True := trivial\n#eval "{pad}"\n'
LIMIT = 8


@pytest.mark.runs_user_code  # under `trusted`: its big answers are the stand-in's #eval echo
async def test_a_stream_that_does_not_read_is_not_read_either():
    config = small_config(1)
    config.server.max_stream_in_flight = LIMIT  # read by edge/stream.py (default 256)
    # The big answers come from the stand-in's `#eval` echo, which the `proof`
    # code policy never lets reach a REPL: this flow-control test runs under `trusted`.
    config.policy.default = "trusted"
    app = await create_server(config)
    pulled = 0

    def requests():
        nonlocal pulled
        for i in range(400):
            pulled += 1
            yield pb.VerifyStreamRequest(
                snippet=pb.Snippet(id=f"s{i}", code=CODE.format(i=i, pad="x" * 65536))
            )

    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        stub = channel.stream_stream(
            "/leanrpc.v1.Verifier/VerifyStream",
            request_serializer=pb.VerifyStreamRequest.SerializeToString,
            response_deserializer=pb.VerifyStreamResponse.FromString,
        )
        stalled = stub(requests())  # never read
        await asyncio.sleep(3.0)
        # Without a bound the server reads all 400 (26 MB) and queues their
        # answers; with it, it reads LIMIT more than the answers the transport
        # took (measured: about 70 read, 136 pulled by the client's buffers).
        assert pulled < 300, pulled

        # Another stream on the same server is answered meanwhile.
        other = stub(
            iter(
                [
                    pb.VerifyStreamRequest(
                        snippet=pb.Snippet(id="o", code=CODE.format(i="o", pad=""))
                    )
                ]
            )
        )
        answers = [m.result async for m in other]
        assert [(a.id, a.status) for a in answers] == [("o", pb.STATUS_VALID)]

        # Reading the stalled stream lets it go on to the end: every snippet answered.
        got = [m.result.id async for m in stalled]
        assert sorted(got) == sorted(f"s{i}" for i in range(400))
        assert pulled == 400
    await app.stop(2.0)
