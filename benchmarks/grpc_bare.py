"""A bare Verifier server: gRPC and nothing else, for benchmarks.grpc_floor (issue 28 item 1).

    python -m benchmarks.grpc_bare --mode aio --port 50051 --delay 0.14

Answers every `Verify` snippet and every `VerifyStream` snippet VALID after `--delay` seconds
(a sleep, no CPU: the time a call spends in leanrpc's pool, so calls are spread out as in the
load harness), with no interceptor, no pool, no REPL, no log line. `--mode aio` serves with grpc.aio on an asyncio loop (what
`leanrpc serve` uses); `--mode sync` serves unary calls with grpcio's thread-pool server.
What its process spends per call is the floor under any Python gRPC server's per-request
CPU on this machine. Runs until SIGTERM or SIGINT.
May import: grpc, leanrpc.v1 (the generated messages), the standard library.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from concurrent import futures

import grpc

from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc


def _valid(snippet_id: str) -> pb.Result:
    return pb.Result(id=snippet_id, status=pb.STATUS_VALID)


class AioVerifier(pb_grpc.VerifierServicer):
    def __init__(self, delay: float) -> None:
        self._delay = delay

    async def Verify(self, request, context):
        await asyncio.sleep(self._delay)
        return pb.VerifyResponse(results=[_valid(s.id) for s in request.snippets])

    async def VerifyStream(self, request_iterator, context):
        out: asyncio.Queue = asyncio.Queue()
        running: set[asyncio.Task] = set()

        async def one(snippet_id: str) -> None:
            await asyncio.sleep(self._delay)
            out.put_nowait(pb.VerifyStreamResponse(result=_valid(snippet_id)))

        async def read() -> None:
            async for message in request_iterator:
                if message.HasField("snippet"):
                    task = asyncio.ensure_future(one(message.snippet.id))
                    running.add(task)
                    task.add_done_callback(running.discard)
            out.put_nowait(None)

        reader = asyncio.ensure_future(read())
        try:
            while not (reader.done() and not running and out.empty()):
                item = await out.get()
                if item is not None:
                    yield item
        finally:
            reader.cancel()


class SyncVerifier(pb_grpc.VerifierServicer):
    def __init__(self, delay: float) -> None:
        self._delay = delay

    def Verify(self, request, context):
        time.sleep(self._delay)
        return pb.VerifyResponse(results=[_valid(s.id) for s in request.snippets])


async def _serve_aio(port: int, delay: float) -> None:
    server = grpc.aio.server()
    pb_grpc.add_VerifierServicer_to_server(AioVerifier(delay), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(0)


def _serve_sync(port: int, delay: float, threads: int) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads))
    pb_grpc.add_VerifierServicer_to_server(SyncVerifier(delay), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    done = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.append(server.stop(0)))
    server.wait_for_termination()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("aio", "sync"), required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.14, help="seconds before each answer")
    parser.add_argument("--threads", type=int, default=16, help="sync: the thread pool's size")
    args = parser.parse_args(argv)
    if args.mode == "aio":
        asyncio.run(_serve_aio(args.port, args.delay))
    else:
        _serve_sync(args.port, args.delay, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
