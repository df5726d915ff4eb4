"""Per-snippet size isolation: a REPL reply too large for one gRPC message
gets its own, cut result; every other snippet is answered normally."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from leanrpc.app import create_server
from leanrpc.client import AsyncClient
from leanrpc.edge import convert
from leanrpc.v1 import verifier_pb2 as pb
from verify_support import small_config

pytestmark = pytest.mark.timeout(600)

FAKE_REPL = str(Path(__file__).with_name("big_reply_repl.py"))
CODE = "import Mathlib\n\ntheorem t{i} (a b : Nat) : a + b = b + a := by\n  rw [Nat.add_comm]\n"
BIG = 200 * 10**6


def fake_repl_config(workers: int = 2):
    config = small_config(workers)
    config.repl.command = [sys.executable, FAKE_REPL]
    config.pool.default_timeout_s = 120
    return config


def codes(count: int, big_at: int, marker: str) -> list[str]:
    out = [CODE.format(i=i) for i in range(count)]
    out[big_at] = CODE.format(i=big_at) + f"--{marker}\n"
    return out


def check(results, big_id: str, named_limit: int | None) -> None:
    limit = 64 * 2**20
    for result in results:
        if result.id == big_id:
            assert result.status == "VALID"  # the verdict stays; the messages are cut
            assert result.error.startswith("RESOURCE_EXHAUSTED: result of 2000"), result.error[:200]
            said = int(re.search(r"over the limit of (\d+) bytes", result.error).group(1))
            # A stream result may take one message; a batch result its share of one.
            assert said == named_limit if named_limit else said <= limit // len(results)
            assert "kept 1 of 1 messages" in result.error
            assert sum(len(m.text) for m in result.messages) < limit
        else:
            assert (result.status, result.error) == ("VALID", ""), (result.id, result.error[:200])


async def test_200_mb_reply_in_a_stream_of_500():
    app = await create_server(fake_repl_config())
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        snippets = [(f"s{i}", code) for i, code in enumerate(codes(500, 250, f"@big:{BIG}"))]
        results = await client.verify(snippets)
        assert len(results) == 500
        check(results, "s250", 64 * 2**20 - 64 * 1024)
    finally:
        await client.close()
        await app.stop(2.0)


async def test_200_mb_reply_in_a_unary_batch():
    app = await create_server(fake_repl_config())
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        results = await client.verify_batch(codes(500, 7, f"@big:{BIG}"))
        assert len(results) == 500
        check(results, "7", None)
    finally:
        await client.close()
        await app.stop(2.0)


def test_fit_result_keeps_messages_in_order_up_to_the_bound():
    out = pb.Result(
        id="x", status=pb.STATUS_INVALID, error="Lean said no", infotree_json="{" + "t" * 5000 + "}"
    )
    for i in range(100):
        out.messages.append(pb.Message(severity=pb.SEVERITY_ERROR, text=f"{i}:" + "m" * 1000))
    size = out.ByteSize()
    fitted = convert.fit_result(out, 20_000)
    assert fitted.ByteSize() <= 20_000
    assert fitted.status == pb.STATUS_INVALID and fitted.infotree_json == ""
    kept = [m.text.split(":")[0] for m in fitted.messages]
    assert kept == [str(i) for i in range(len(kept))] and 5 < len(kept) < 100
    assert fitted.error.startswith(
        f"RESOURCE_EXHAUSTED: result of {size} bytes is over the limit of 20000 bytes"
    )
    assert f"kept {len(kept)} of 100 messages" in fitted.error and fitted.error.endswith(
        "; Lean said no"
    )
    assert "dropped the infotree" in fitted.error
    small = pb.Result(id="y", status=pb.STATUS_VALID)
    assert convert.fit_result(small, 20_000) is small and small.error == ""


def test_fit_batch_bounds_the_whole_response():
    results = [pb.Result(id=str(i), status=pb.STATUS_VALID) for i in range(50)]
    results[3].messages.append(pb.Message(text="z" * 300_000))
    fitted = convert.fit_batch(results, 200_000)
    assert sum(r.ByteSize() for r in fitted) <= 200_000
    assert [r.id for r in fitted] == [str(i) for i in range(50)]
    assert fitted[3].error.startswith("RESOURCE_EXHAUSTED") and all(
        r.error == "" for i, r in enumerate(fitted) if i != 3
    )
