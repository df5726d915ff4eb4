"""Every tool over stdio with the official `mcp` client: `leanrpc mcp` relaying to a
server's door under a token, and `leanrpc mcp` running a local server it stops on exit."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys

import psutil
from mcp import Client, StdioServerParameters

from agents_support import exercise_every_tool, ok
from testkit import descendants


def _relay(tmp_path, *args: str, token: str | None = None) -> StdioServerParameters:
    env = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "PATH": os.environ["PATH"],
    }
    if token:
        env["LEANRPC_MCP_TOKEN"] = token
    return StdioServerParameters(
        command=sys.executable, args=["-m", "leanrpc", "mcp", *args], env=env, cwd=str(tmp_path)
    )


async def test_every_tool_over_stdio_relayed_to_a_server_under_a_token(served, tmp_path):
    door = await served(tokens=["tok-a"])
    async with Client(_relay(tmp_path, "--address", door.url, token="tok-a")) as agent:
        await exercise_every_tool(agent)
        status = await ok(agent, "lean_status")
    expected = "token:" + hashlib.sha256(b"tok-a").hexdigest()[:16]
    assert status["you"]["identity"] == expected  # the relay's calls are the token's


async def test_a_relay_without_the_token_gets_no_tools(served, tmp_path):
    door = await served(tokens=["tok-a"])
    failed = None
    try:
        async with Client(_relay(tmp_path, "--address", door.url, token="wrong")) as agent:
            await agent.list_tools()
    except Exception as exc:  # noqa: BLE001 - the relay could not connect: the session ends
        failed = exc
    assert failed is not None


async def test_every_tool_over_stdio_on_a_local_server_stopped_on_exit(tmp_path):
    seen: dict[int, list[str]] = {}  # pid -> its command line, read while it lived

    async def watch():
        while True:
            for pid in descendants() - seen.keys():
                try:
                    seen[pid] = psutil.Process(pid).cmdline()
                except psutil.NoSuchProcess:
                    pass
            await asyncio.sleep(0.2)

    watcher = asyncio.ensure_future(watch())
    try:
        async with Client(_relay(tmp_path, "--workers", "2")) as agent:
            await exercise_every_tool(agent)
            status = await ok(agent, "lean_status")
            assert status["workers"] == 2 and status["you"]["identity"] == "peer:ipv4:127.0.0.1"
    finally:
        watcher.cancel()
    repls = [pid for pid, cmdline in seen.items() if any("leanrpc.standin" in p for p in cmdline)]
    assert len(repls) >= 2  # the watcher saw the local server's REPL workers
    # Whatever REPLs the local server ran are gone once the agent host closed it.
    deadline = asyncio.get_running_loop().time() + 15
    while any(_alive(pid) for pid in seen) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
    assert not [pid for pid in seen if _alive(pid)]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
