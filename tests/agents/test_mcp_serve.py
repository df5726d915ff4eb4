"""`leanrpc serve --mcp-port` opens the door on the composition root's own path (the
`[mcp] port` branch of create_server), says where, and closes it on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys

from agents_support import http_agent, ok

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "cli"))
from cli_support import Served, leanrpc  # noqa: E402
from testkit import free_port


async def test_serve_mcp_port_serves_the_tools_and_stops_on_sigterm():
    port = free_port()
    served = Served("--mcp-port", str(port))
    try:
        line = served.process.stdout.readline().strip()
        assert line == f"MCP door on http://127.0.0.1:{port}/mcp", line
        async with http_agent(line.split()[-1]) as agent:
            checked = await ok(agent, "lean_check", code="theorem s : True := trivial")
        assert checked["status"] == "VALID"
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=60) == 0
    finally:
        served.stop()


def test_mcp_port_shares_no_port_with_another_door():
    done = leanrpc("serve", "--port", "7777", "--mcp-port", "7777")
    assert done.returncode == 2 and "server.port and mcp.port are both port 7777" in done.stderr


def test_leanrpc_mcp_refuses_an_address_that_is_not_a_url():
    done = leanrpc("mcp", "--address", "localhost:8765", stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "http(s) URL" in done.stderr
