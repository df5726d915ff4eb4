"""Fixtures for the MCP door: a leanrpc server on the stand-in with its MCP door on a real port."""

from __future__ import annotations

import dataclasses

import pytest

from leanrpc.app import create_server, start_agents_door
from testkit import loopback_config


@dataclasses.dataclass
class Door:
    app: object
    door: object

    @property
    def url(self) -> str:
        return self.door.url


@pytest.fixture
async def served():
    """start(workers=2, tokens=(), **overrides) -> Door; stopped after the test."""
    started: list[Door] = []

    async def start(workers: int = 2, tokens=(), **overrides) -> Door:
        config = loopback_config(workers=workers, **overrides)
        config.server.auth_tokens = list(tokens)
        app = await create_server(config)
        door = Door(app, await start_agents_door(app, port=0))
        app.mcp = door.door  # stopped with the app
        started.append(door)
        return door

    yield start
    for door in started:
        await door.app.stop(2.0)
