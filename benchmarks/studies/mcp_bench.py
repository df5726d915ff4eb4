"""The MCP door's own costs (issue 40): server CPU per tool call, side by side with the
gRPC call doing the same work, and the memory of 20 connected agents.

    python -m benchmarks.studies.mcp_bench --calls 200 --rounds 2

One `leanrpc serve` subprocess on the stand-in REPL (2 warm workers, result cache off, the
MCP door on), the official `mcp` client for the agents and leanrpc's Python client for
gRPC. CPU: the server process's own CPU (user + system, its REPLs not counted) read before
and after `--calls` calls of one kind, `--concurrency` lanes in flight; kinds alternate
within each round (MCP, then gRPC, for each pair) so both see the same machine. Each
kind's clients connect and make one call each before its clock starts. Pairs:
lean_check / unary Verify of one snippet (distinct snippets: the cache is off anyway),
lean_tactic / RunTactic on one state; lean_status alone (no REPL: the door's floor).
Memory: the server's RSS (own, not its REPLs) with no agent, with 20 agents connected
and idle, and after each of the 20 made a check and opened a proof state: first agents on
the current protocol (the SDK client's "auto": per-request, no server session), then on the
legacy initialize handshake (a server session each, as hosts on mcp 1.x); then
the RSS of one `leanrpc mcp --address` stdio relay (what an agent host pays per agent
process when it starts one per agent; the REPLs stay shared in the server).
May import: benchmarks.targets.common, leanrpc.client, mcp, httpx2, psutil.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import psutil
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from benchmarks.targets.common import (
    free_port,
    leanrpc_table,
    serve_leanrpc,
    stop_process,
    wait_port,
)

AND_CODE = "theorem and_t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by sorry"


def cpu_seconds(process: psutil.Process) -> float:
    t = process.cpu_times()
    return t.user + t.system


@contextlib.asynccontextmanager
async def agent(url: str, mode: str = "auto"):
    http = httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=300.0))
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode=mode) as client:
        yield client


async def lanes(clients: list, calls: int, run_one) -> None:
    """`calls` calls spread over the open `clients`, one lane each."""
    queue = list(range(calls))

    async def lane(client):
        while queue:
            await run_one(client, queue.pop())

    await asyncio.gather(*(lane(c) for c in clients))


async def measure(server: psutil.Process, work) -> tuple[float, float]:
    """(server CPU ms, wall s) of `await work()`."""
    before, started = cpu_seconds(server), time.monotonic()
    await work()
    return (cpu_seconds(server) - before) * 1000, time.monotonic() - started


async def cpu_rows(url: str, port: int, server, calls: int, concurrency: int, rounds: int):
    from leanrpc.client import AsyncClient

    def grpc_lane():
        @contextlib.asynccontextmanager
        async def opened():
            client = AsyncClient(f"127.0.0.1:{port}", max_retries=0)
            try:
                yield client
            finally:
                await client.close()

        return opened()

    async def mcp_check(client, i):
        result = await client.call_tool(
            "lean_check", {"code": f"theorem c{i}_{time.monotonic_ns()} : True := trivial"}
        )
        assert not result.is_error, result

    async def grpc_check(client, i):
        (result,) = await client.verify_batch(
            [f"theorem c{i}_{time.monotonic_ns()} : True := trivial"]
        )
        assert result.status == "VALID", result

    async with agent(url) as setup:
        state = await setup.call_tool("lean_proof_state", {"code_with_sorry": AND_CODE})
        mcp_state = state.structured_content["states"][0]["state_id"]
    grpc_setup = AsyncClient(f"127.0.0.1:{port}", max_retries=0)
    grpc_state = (await grpc_setup.start_proof(AND_CODE)).states[0].state_id
    await grpc_setup.close()

    async def mcp_tactic(client, i):
        result = await client.call_tool(
            "lean_tactic", {"state_id": mcp_state, "tactic": "constructor"}
        )
        assert not result.is_error, result

    async def grpc_tactic(client, i):
        await client.run_tactic(grpc_state, "constructor")

    async def mcp_status(client, i):
        result = await client.call_tool("lean_status", {})
        assert not result.is_error, result

    kinds = [
        ("MCP lean_check", lambda: agent(url), mcp_check),
        ("gRPC Verify (unary, 1 snippet)", grpc_lane, grpc_check),
        ("MCP lean_tactic", lambda: agent(url), mcp_tactic),
        ("gRPC RunTactic", grpc_lane, grpc_tactic),
        ("MCP lean_status (no REPL)", lambda: agent(url), mcp_status),
    ]
    rows = {name: [] for name, _, _ in kinds}
    for _ in range(rounds):
        for name, make_lane, run_one in kinds:
            async with contextlib.AsyncExitStack() as stack:
                # Connected and warm before the clock starts: the calls alone are measured.
                clients = [await stack.enter_async_context(make_lane()) for _ in range(concurrency)]
                await lanes(clients, concurrency, run_one)
                ms, wall = await measure(server, lambda: lanes(clients, calls, run_one))
            rows[name].append((ms / calls, calls / wall))
    return rows


async def memory_rows(url: str, server: psutil.Process, agents: int, mode: str) -> dict:
    rss = lambda: server.memory_info().rss / 2**20  # noqa: E731
    await asyncio.sleep(1.0)
    out = {f"no agent ({mode})": rss()}
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(agent(url, mode)) for _ in range(agents)]
        await asyncio.gather(*(c.list_tools() for c in clients))
        out[f"{agents} agents connected, idle ({mode})"] = rss()

        async def work(c, k):
            await c.call_tool("lean_check", {"code": f"theorem m{k} : True := trivial"})
            await c.call_tool("lean_proof_state", {"code_with_sorry": AND_CODE})

        await asyncio.gather(*(work(c, k) for k, c in enumerate(clients)))
        out[f"{agents} agents after a check and a proof state each ({mode})"] = rss()
    return out


async def relay_rss(url: str) -> float:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "leanrpc", "mcp", "--address", url]
    )
    async with Client(params) as client:
        await client.list_tools()
        await client.call_tool("lean_status", {})
        me = psutil.Process()
        relays = [
            p
            for p in me.children(recursive=True)
            if "mcp" in p.cmdline() and "--address" in p.cmdline()
        ]
        return sum(p.memory_info().rss for p in relays) / 2**20


async def main(args) -> None:
    mcp_port = free_port()
    table = leanrpc_table(2, args.scale)
    table["mcp"] = {"port": mcp_port}
    with tempfile.TemporaryDirectory() as folder:
        process, port = serve_leanrpc(table, Path(folder))
        try:
            await wait_port(port, process, 120, "leanrpc serve")
            await wait_port(mcp_port, process, 60, "the MCP door")
            url = f"http://127.0.0.1:{mcp_port}/mcp"
            server = psutil.Process(process.pid)
            print(f"warm-up ({args.calls // 4} calls)...", flush=True)
            rows = {}
            if not args.memory_only:
                await cpu_rows(url, port, server, max(args.calls // 4, 8), args.concurrency, 1)
                rows = await cpu_rows(url, port, server, args.calls, args.concurrency, args.rounds)
            memory = await memory_rows(url, server, args.agents, "auto")
            memory |= await memory_rows(url, server, args.agents, "legacy")
            relay = await relay_rss(url)
        finally:
            stop_process(process)
    print(
        f"\n{args.calls} calls per kind per round, {args.concurrency} lanes, {args.rounds} rounds"
    )
    print("| call | server CPU / call (ms), per round | calls/s, per round |")
    print("| --- | --- | --- |")
    for name, per_round in rows.items():
        cpu = ", ".join(f"{ms:.2f}" for ms, _ in per_round)
        rate = ", ".join(f"{r:.0f}" for _, r in per_round)
        print(f"| {name} | {cpu} | {rate} |")
    print("\n| server RSS (own, REPLs not counted) | MiB |")
    print("| --- | ---: |")
    for name, mib in memory.items():
        print(f"| {name} | {mib:.1f} |")
    print(f"\none `leanrpc mcp --address` stdio relay process: {relay:.1f} MiB RSS")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--memory-only", action="store_true", help="skip the CPU rows")
    parser.add_argument("--scale", type=float, default=0.05, help="the stand-in's cost scale")
    asyncio.run(main(parser.parse_args()))


if __name__ == "__main__":
    cli()
