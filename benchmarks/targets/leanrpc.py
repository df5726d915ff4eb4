"""Target: leanrpc over gRPC (unary Verify or one VerifyStream), started as `leanrpc serve`.

May import: benchmarks.config, benchmarks.measure, benchmarks.targets.common.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

from .. import workloads
from ..config import Record, RunConfig
from ..measure import distribution_ms
from .common import leanrpc_table, serve_leanrpc, stop_process, wait_port


def _seconds(duration) -> float:
    """A google.protobuf.Duration (Timings fields since the v1 contract) as float seconds."""
    return duration.seconds + duration.nanos / 1e9


class LeanrpcTarget:
    name = "leanrpc"
    extra_serve_args: tuple[str, ...] = ()

    def __init__(self, cfg: RunConfig, tmp: Path) -> None:
        self.cfg = cfg
        self.tmp = tmp
        self.port = 0  # chosen by serve_leanrpc at start
        self.process: subprocess.Popen | None = None
        self._stream = None
        self._pending: dict[str, asyncio.Future] = {}
        self._reader: asyncio.Task | None = None
        self._write_lock = asyncio.Lock()  # grpc.aio allows one pending write per stream

    async def start(self) -> int:
        import grpc
        from google.protobuf import duration_pb2

        from leanrpc.v1 import verifier_pb2 as pb
        from leanrpc.v1 import verifier_pb2_grpc as pb_grpc

        self.pb = pb
        table = leanrpc_table(self.cfg.workers, self.cfg.scale, self.cfg.checks)
        table["pool"]["default_timeout_s"] = self.cfg.timeout_s
        self.process, self.port = serve_leanrpc(
            table, self.tmp, serve_args=self.extra_serve_args, pure_python=self.cfg.pure_python
        )
        await wait_port(self.port, self.process, 60, "leanrpc server")
        self.channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{self.port}",
            options=[
                ("grpc.max_receive_message_length", 64 << 20),
                ("grpc.max_send_message_length", 64 << 20),
            ],
        )
        self.stub = pb_grpc.VerifierStub(self.channel)
        info = await self.stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=30)
        self.info = {
            "verifier": info.verifier.kind,
            "native_core": info.native_core,
            "workers": info.workers,
        }
        # Round trip of a trivial RPC: the client + gRPC transport floor inside every overhead figure.
        floor = []
        for _ in range(50):
            t0 = time.monotonic()
            await self.stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=30)
            floor.append(time.monotonic() - t0)
        self.info["rpc_floor_ms"] = distribution_ms(floor)
        if info.verifier.kind != "stand-in":
            raise RuntimeError(f"expected the stand-in REPL, server reports {info.verifier.kind!r}")
        timeout = duration_pb2.Duration()
        timeout.FromNanoseconds(round(self.cfg.timeout_s * 1e9))
        self.options = pb.VerifyOptions(timeout=timeout, reuse=self.cfg.reuse)
        if self.cfg.rpc == "stream":
            self._stream = self.stub.VerifyStream()
            await self._stream.write(pb.VerifyStreamRequest(options=self.options))
            self._reader = asyncio.get_running_loop().create_task(self._read_stream())
        return self.process.pid

    async def _read_stream(self) -> None:
        try:
            async for response in self._stream:
                future = self._pending.pop(response.result.id, None)
                if future is not None and not future.done():
                    future.set_result(response.result)
        except Exception as exc:  # the stream broke: fail everything still waiting
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(exc)
            self._pending.clear()

    async def send(self, item: workloads.Item, request_id: str) -> Record:
        import grpc

        pb = self.pb
        start = time.monotonic()
        try:
            if self._stream is not None:
                future = asyncio.get_running_loop().create_future()
                self._pending[request_id] = future
                async with self._write_lock:
                    await self._stream.write(
                        pb.VerifyStreamRequest(snippet=pb.Snippet(id=request_id, code=item.code))
                    )
                result = await future
            else:
                response = await self.stub.Verify(
                    pb.VerifyRequest(
                        snippets=[pb.Snippet(id=request_id, code=item.code)], options=self.options
                    ),
                    timeout=self.cfg.timeout_s + 30,
                )
                result = response.results[0]
        except grpc.aio.AioRpcError as exc:
            return Record(
                request_id, start, time.monotonic(), f"grpc:{exc.code().name}", item.burn_s
            )
        end = time.monotonic()
        t = result.timings
        return Record(
            request_id,
            start,
            end,
            pb.Status.Name(result.status).removeprefix("STATUS_"),
            item.burn_s,
            repl_s=_seconds(t.boot) + _seconds(t.header) + _seconds(t.body),
            queue_s=_seconds(t.queue),
            verifier=result.verifier.kind,
            server_total_s=_seconds(t.total),
            warm_header=result.reuse.warm_header,
        )

    async def stop(self) -> None:
        if self._stream is not None:
            await self._stream.done_writing()
            if self._reader:
                try:
                    await asyncio.wait_for(self._reader, 10)
                except (asyncio.TimeoutError, Exception):
                    self._reader.cancel()
        if getattr(self, "channel", None) is not None:
            await self.channel.close()
        if self.process:
            stop_process(self.process)
