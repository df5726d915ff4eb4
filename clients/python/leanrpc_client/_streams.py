"""The end of a client stream: its sender task settled, a broken stream's error.

A stream call here has a sender task (writes, then the half-close) beside the
reading loop. When the server ends the call first (a graceful stop stops
reading), the sender may still wait (for a window slot no answer will free,
or on the caller's own pairs) or have failed with the call; `settle` ends it
without raising, and `broken` is the error the retry logic reads as a broken
stream (UNAVAILABLE: what has no answer never ran). May import: grpc, asyncio.
"""

from __future__ import annotations

import asyncio

import grpc


async def settle(sender: asyncio.Task, *, cancel: bool) -> None:
    """Waits for the sender (cancelled first with `cancel`); its error is read, not raised."""
    if cancel:
        sender.cancel()
    await asyncio.wait([sender])
    if not sender.cancelled():
        sender.exception()  # read, so asyncio does not report it


def broken(details: str) -> grpc.aio.AioRpcError:
    """A stream that broke under the client: UNAVAILABLE, re-sendable."""
    return grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details
    )
