"""The Python and Node clients' first-call slips (issues 38 item 5, 41 item 9),
against a real server: each slip is a TypeError that names what was meant,
before anything is sent; a Client pickles; the progress bar follows time."""

from __future__ import annotations

import asyncio
import io
import json
import pickle
import subprocess
import sys

import pytest

from leanrpc.app import create_server
from leanrpc.client import AsyncClient, Client
from leanrpc.client import progress as client_progress
from testkit import loopback_config

GOOD = "theorem t : True := trivial"


@pytest.fixture(scope="module")
def client():
    with Client.local(workers=1) as local:
        yield local
    server = _local_servers()
    Client.stop_local()  # no child process outlives the module (tests/reliability counts them)
    assert all(s.process.poll() is not None for s in server)


def _local_servers():
    from leanrpc.client import _local

    return list(_local._SERVERS.values())


@pytest.mark.parametrize("method", ["verify", "verify_batch"])
def test_a_bare_str_is_a_type_error_not_one_snippet_per_character(client, method):
    with pytest.raises(
        TypeError, match=rf"{method}\(\) takes a list of snippets.*{method}\(\[code\]\)"
    ):
        getattr(client, method)(GOOD)
    with pytest.raises(TypeError, match="not one bytes"):
        getattr(client, method)(GOOD.encode())
    # The list form of the same call still works.
    assert [r.status for r in getattr(client, method)([GOOD])] == ["VALID"]


@pytest.mark.parametrize("method", ["verify", "verify_batch"])
async def test_the_async_twins_refuse_a_bare_str_too(client, method):
    async with AsyncClient(client.address) as aclient:
        with pytest.raises(TypeError, match=rf"{method}\(\) takes a list of snippets"):
            await getattr(aclient, method)(GOOD)


def test_timeout_points_at_timeout_s(client):
    with pytest.raises(TypeError, match=r"'timeout'; did you mean timeout_s=\?"):
        client.verify([GOOD], timeout=2)
    with pytest.raises(TypeError, match=r"'deadline'; did you mean deadline_s=\?"):
        client.verify_batch([GOOD], deadline=2)
    with pytest.raises(TypeError, match=r"'timout_s'; did you mean timeout_s=\?"):
        client.open_session("", timout_s=2)


def test_a_kimina_style_dict_without_code_names_the_key(client):
    with pytest.raises(TypeError, match=r'snippet 1 is a dict without a "code" key \(its "proof"'):
        client.verify([{"id": "a", "code": GOOD}, {"custom_id": "b", "proof": GOOD}])
    with pytest.raises(TypeError, match=r"snippet 0's \"code\" must be a str, not int"):
        client.verify_batch([{"id": "a", "code": 7}])
    with pytest.raises(TypeError, match="references takes one reference per snippet"):
        client.verify([GOOD], references="theorem t : True := sorry")


def test_a_client_pickles_and_the_copy_verifies_in_another_process(client):
    plain = Client(client.address)
    try:
        data = pickle.dumps(plain)
    finally:
        plain.close()
    script = (
        "import pickle, sys\n"
        "c = pickle.loads(sys.stdin.buffer.read())\n"
        f"print(c.verify([{GOOD!r}])[0].status)\n"
        "c.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=data, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "VALID"
    # A local client's copy in this process reaches the same server.
    copy = pickle.loads(pickle.dumps(client))
    try:
        assert copy.address == client.address
        assert copy.verify([GOOD])[0].status == "VALID"
    finally:
        copy.close()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_the_progress_bar_follows_time_not_a_count(monkeypatch):
    """40 snippets taking seconds drew nothing (a 200-snippet threshold): a few
    slow snippets on a terminal now get a bar once the batch outlasts PROGRESS_AFTER_S."""
    pytest.importorskip("tqdm")
    monkeypatch.setattr(client_progress, "PROGRESS_AFTER_S", 0.3)
    app = await create_server(loopback_config(workers=1))
    try:
        async with AsyncClient(f"127.0.0.1:{app.port}") as aclient:
            fast = _Terminal()
            monkeypatch.setattr(sys, "stderr", fast)
            await aclient.verify([GOOD])  # quick: no bar
            assert "snippet" not in fast.getvalue()
            slow = _Terminal()
            monkeypatch.setattr(sys, "stderr", slow)
            snippets = [f"--@standin: burn=0.4\ntheorem t{n} : True := trivial" for n in range(4)]
            results = await aclient.verify(snippets)
            assert [r.status for r in results] == ["VALID"] * 4
            assert "verify:" in slow.getvalue() and "4/4" in slow.getvalue()
    finally:
        await app.stop(2.0)
    await asyncio.sleep(0)


NODE_SLIPS = r"""
const { LeanrpcClient } = require('.');
const client = new LeanrpcClient(process.argv[1]);
const tries = {
  str: () => client.verify('theorem t : True := trivial'),
  strBatch: () => client.verifyBatch('theorem t : True := trivial'),
  proof: () => client.verify([{ id: 'a', proof: 'theorem t : True := trivial' }]),
  timeout: () => client.verifyBatch([{ id: 'a', code: 'x' }], { timeout: 2 }),
};
(async () => {
  const out = {};
  for (const [name, f] of Object.entries(tries)) {
    try { await f(); out[name] = 'no error'; } catch (e) { out[name] = `${e.constructor.name}: ${e.message}`; }
  }
  const ok = await client.verify([{ id: 'a', code: 'theorem t : True := trivial' }]);
  out.ok = ok[0].status;
  console.log(JSON.stringify(out));
  client.close();
})();
"""


def test_the_node_client_refuses_the_same_slips(client, node_client):
    done = subprocess.run(
        ["node", "-e", NODE_SLIPS, client.address],
        cwd=node_client,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["str"].startswith("TypeError: verify() takes an array of snippets, not one string")
    assert out["strBatch"].startswith("TypeError: verifyBatch() takes an array of snippets")
    assert out["proof"].startswith('TypeError: snippet 0 has no string "code" (its "proof"')
    assert (
        out["timeout"]
        == 'TypeError: verifyBatch() got an unknown option "timeout"; did you mean timeoutS?'
    )
    assert out["ok"] == "VALID"


def test_a_batch_summary_counts_outcomes_times_and_cache_hits(client):
    from leanrpc.client import summarize

    batch = [
        GOOD,
        "theorem b (x : Nat) : x = x + 1 := by\n  exact Nat.nonexistent_lemma x\n",
        "theorem s : True := by\n  sorry\n",
    ]
    first = client.verify(batch)
    again = client.verify(batch)
    summary = summarize(first + again)
    assert summary.total == 6
    assert summary.counts == {"INVALID": 2, "SORRY": 2, "VALID": 2}
    assert summary.valid == 2 and summary.cache_hits == sum(
        1 for r in first + again if r.cache_source
    )
    assert all(r.cache_source for r in again)  # the second time, from the cache
    assert summary.time_max_s >= summary.time_mean_s > 0
    assert "valid 2/6" in str(summary)
