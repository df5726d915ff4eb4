"""Entries, the memory LRU, the disk store (crash-safe) and the tiers."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from leanrpc.cache import DiskStore, MemoryStore, ResultCache, codec
from leanrpc.results import (
    Message,
    Position,
    Severity,
    SorryInfo,
    Status,
    Timings,
    VerifierIdentity,
    VerifyResult,
)

KEY = "ab" + "0" * 62
OTHER = "cd" + "1" * 62


def verdict(status=Status.INVALID, infotree=None) -> VerifyResult:
    return VerifyResult(
        id="orig",
        status=status,
        messages=[
            Message(Severity.ERROR, Position(3, 2), Position(3, 9), "unknown identifier 'foo'")
        ],
        sorries=[SorryInfo(Position(4, 0), None, "⊢ True")],
        timings=Timings(body_s=1.5, total_s=2.0),
        verifier=VerifierIdentity(kind="stand-in", lean_version="v4.19.0"),
        infotree=infotree,
        axioms=["propext"],
    )


def test_entry_round_trip_keeps_the_verdict_and_names_the_run():
    data = codec.encode(KEY, "run-1", 123.0, verdict())
    back = codec.decode(data, KEY)
    assert (back.run, back.body_s, back.stored_at) == ("run-1", 1.5, 123.0)
    answer = back.answer("mine", source="disk", total_s=0.01)
    original = verdict()
    assert answer.id == "mine"
    assert (answer.status, answer.messages, answer.sorries, answer.axioms) == (
        original.status,
        original.messages,
        original.sorries,
        original.axioms,
    )
    assert answer.verifier == original.verifier
    assert (answer.reuse.cache_source, answer.reuse.original_run) == ("disk", "run-1")
    assert answer.timings.body_s == 0.0 and answer.timings.total_s == 0.01


def test_entries_are_lz4_compressed():
    big = verdict(infotree=[{"node": "x", "children": []}] * 50_000)  # infotrees can be megabytes
    data = codec.encode(KEY, "r", 0.0, big)
    assert len(data) < len(json.dumps(big.infotree)) / 20
    assert codec.decode(data, KEY).result.infotree == big.infotree


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "empty"])
def test_damaged_entries_do_not_decode(damage):
    data = codec.encode(KEY, "r", 0.0, verdict())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data = data[:-6] + bytes([data[-6] ^ 0xFF]) + data[-5:]
    elif damage == "magic":
        data = b"XXXX" + data[4:]
    else:
        data = b""
    with pytest.raises(codec.CorruptEntry):
        codec.decode(data, KEY)


def test_an_entry_under_another_key_is_refused():
    with pytest.raises(codec.CorruptEntry):
        codec.decode(codec.encode(KEY, "r", 0.0, verdict()), OTHER)


def test_memory_store_is_an_lru_bounded_in_bytes():
    store = MemoryStore(max_bytes=300)
    for i in range(3):
        store.put(f"k{i}", bytes(100))
    assert store.get("k0") is not None  # k0 is now the most recent
    store.put("k3", bytes(100))
    assert store.get("k1") is None and store.get("k0") is not None
    assert store.bytes_held == 300 and store.evictions == 1
    store.put("huge", bytes(301))
    assert store.get("huge") is None and store.bytes_held == 300


async def test_disk_store_survives_a_new_instance_and_turns_corruption_into_a_warned_miss(
    tmp_path, caplog
):
    first = DiskStore(tmp_path)
    cache = ResultCache(MemoryStore(1 << 20), disk=first)
    cache.store(KEY, "run-a", verdict())
    await cache.flush()
    # A restart: fresh memory, same directory.
    cache = ResultCache(MemoryStore(1 << 20), disk=DiskStore(tmp_path))
    hit = await cache.lookup(KEY)
    assert hit is not None and hit[1] == "disk" and hit[0].run == "run-a"
    assert (await cache.lookup(KEY))[1] == "memory"  # promoted
    path = first.path_for(OTHER)
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(
        first.sealer.seal(OTHER, codec.encode(OTHER, "r", 0.0, verdict())[:40])
    )  # torn
    with caplog.at_level(logging.WARNING, logger="leanrpc.cache"):
        assert await cache.lookup(OTHER) is None
        await cache.flush()
    assert "corrupt disk entry" in caplog.text
    assert not path.exists()  # removed, so the next run rewrites it
    assert cache.stats.corrupt == 1 and cache.stats.forged == 0


async def test_a_failing_disk_write_never_fails_the_caller(tmp_path, caplog):
    store = DiskStore(tmp_path / "d")
    cache = ResultCache(MemoryStore(1 << 20), disk=store)
    store.put_sync = lambda key, data: (_ for _ in ()).throw(OSError(28, "No space left on device"))
    with caplog.at_level(logging.WARNING, logger="leanrpc.cache"):
        cache.store(KEY, "r", verdict())
        await cache.flush()
    assert cache.stats.store_errors == 1 and "background write failed" in caplog.text
    assert (await cache.lookup(KEY))[1] == "memory"


_WRITER = r"""
import secrets, sys
from leanrpc.cache import DiskStore, codec
from leanrpc.results import Status, VerifyResult
store = DiskStore(sys.argv[1])
# Hex text compresses only ~2x: each write is ~200 KB, so a kill lands mid-write.
payload = VerifyResult(id="x", status=Status.VALID, infotree={"text": secrets.token_hex(200_000)})
print("ready", flush=True)
i = 0
while True:
    key = format(i % 64, "064x")
    store.put_sync(key, codec.encode(key, f"run-{i}", 0.0, payload))
    i += 1
"""


def test_disk_store_survives_kill_9_during_writes(tmp_path):
    root = tmp_path / "cache"
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout.readline().strip() == "ready"
        # Let it get well into rewriting entries, then kill it mid-write.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            written = [p for p in root.glob("*/*.lrc")]
            if len(written) >= 64:
                break
            time.sleep(0.05)
        time.sleep(0.3)
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(10)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(10)
    assert writer.returncode == -signal.SIGKILL
    store = DiskStore(root)  # start-up removes the temp file of the killed write
    assert not list(root.glob("*/.tmp-*"))
    entries = sorted(root.glob("*/*.lrc"))
    assert len(entries) == 64
    for path in entries:
        key = path.name.removesuffix(".lrc")
        decoded = codec.decode(store.get_sync(key), key)  # every entry whole
        assert (
            decoded.result.status is Status.VALID
            and len(decoded.result.infotree["text"]) == 400_000
        )
