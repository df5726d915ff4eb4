"""`leanrpc verify` input checks, output order, summary and Ctrl-C (issue 29),
through the real command against a real server on port 0."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess

import pytest

from cli_support import GOOD, LEANRPC, Served, clean_env, leanrpc


@pytest.fixture
def sigint_default():
    """Children started in the test get SIGINT's default action, as from a terminal.

    A process started in the background by a non-interactive shell (`.ci/run &`)
    has SIGINT ignored, and an ignored signal stays ignored across fork and exec:
    the client under test would then never see the Ctrl-C these tests send. A
    Python handler here is reset to the default in every child at exec."""
    before = signal.getsignal(signal.SIGINT)
    if before is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if before is signal.SIG_IGN:
        signal.signal(signal.SIGINT, before)


@pytest.fixture(scope="module")
def server():
    served = Served()
    yield served
    served.stop()


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        (
            "--timeout",
            "-5",
            "argument --timeout: -5 must be 0 (the server's default) or a positive number of seconds",
        ),
        (
            "--server",
            "127.0.0.1:99999",
            "argument --server: '127.0.0.1:99999': the port must be between 1 and 65535",
        ),
        ("--retries", "-1", "argument --retries: -1 must be 0 or more"),
        (
            "--timeout",
            "nan",
            "argument --timeout: nan must be 0 (the server's default) or a positive number of seconds",
        ),
        ("--token", "", "argument --token: is empty"),
        ("--reference", "MISSING", "argument --reference: MISSING: no such file"),
        ("--reference-dir", "MISSING", "argument --reference-dir: MISSING: no such folder"),
    ],
)
def test_bad_values_are_usage_errors_before_anything_runs(tmp_path, flag, value, says):
    value, says = (text.replace("MISSING", str(tmp_path / "nope")) for text in (value, says))
    (tmp_path / "a.lean").write_text(GOOD)
    done = leanrpc("verify", str(tmp_path / "a.lean"), flag, value)
    assert done.returncode == 2
    assert done.stdout == ""  # nothing was verified
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"leanrpc verify: error: {says}"
    assert done.stderr == f"leanrpc verify: error: {says}\n"  # one line, no usage block


def test_missing_file_exits_1_alone_and_beside_a_good_file(server, tmp_path):
    (tmp_path / "good.lean").write_text(GOOD)
    missing = str(tmp_path / "nope.lean")
    alone = leanrpc("verify", missing, "--server", server.address, "--quiet")
    beside = leanrpc(
        "verify", str(tmp_path / "good.lean"), missing, "--server", server.address, "--quiet"
    )
    assert alone.returncode == beside.returncode == 1
    line = f"{'REJECTED':<14} {missing}  ({missing}: no such file or folder)"
    assert alone.stdout.splitlines() == [line, "0 of 1 valid"]
    assert beside.stdout.splitlines()[1:] == [line, "1 of 2 valid"]


def test_folder_walk_reports_broken_symlink_and_empty_file_in_natural_order(server, tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    for n in (1, 2, 10, 11):
        (folder / f"l{n}.lean").write_text(GOOD.replace("theorem t", f"theorem t{n}"))
    (folder / "l3.lean").symlink_to(tmp_path / "gone.lean")
    (folder / "l4.lean").write_text("  \n")
    done = leanrpc("verify", str(folder), "--server", server.address)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    names = [line.split()[1].rsplit("/", 1)[-1] for line in lines[:-1]]
    assert names == ["l1.lean", "l2.lean", "l3.lean", "l4.lean", "l10.lean", "l11.lean"]
    assert (
        lines[2]
        == f"{'REJECTED':<14} {folder}/l3.lean  ({folder}/l3.lean: broken symbolic link (to {tmp_path}/gone.lean))"
    )
    assert lines[3] == f"{'REJECTED':<14} {folder}/l4.lean  ({folder}/l4.lean: the file is empty)"
    assert lines[-1] == "4 of 6 valid"
    # The summary table: stderr, counts per outcome, then elapsed and rate.
    summary = done.stderr.splitlines()
    assert summary[0] == "summary:"
    assert summary[1].split() == ["VALID", "4"]
    assert summary[2].split() == ["REJECTED", "(not", "sent)", "2"]
    assert summary[3].split() == ["total", "6"]
    assert summary[4].startswith("  elapsed ") and summary[4].endswith(" snippets/s")
    quiet = leanrpc("verify", str(folder), "--server", server.address, "--quiet", "--json")
    assert quiet.stderr == ""
    assert [
        json.loads(line)["id"].rsplit("/", 1)[-1] for line in quiet.stdout.splitlines()
    ] == names


def test_one_sigint_mid_batch_prints_what_arrived_then_exits_130(server, tmp_path, sigint_default):
    total = 20
    for n in range(total):
        # Distinct text (no cache hits), each ~0.4 s of stand-in CPU on one worker.
        (tmp_path / f"f{n}.lean").write_text(
            f"--@standin: burn=0.4\ntheorem s{n} : {n} = {n} := rfl\n"
        )
    with open(tmp_path / "stderr.txt", "w+") as stderr:
        process = subprocess.Popen(
            [LEANRPC, "verify", str(tmp_path), "--server", server.address],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=clean_env(),
        )
        # Results stream: two arrived. (Read on through the same buffered pipe:
        # communicate() would skip lines readline() already buffered.)
        first = [process.stdout.readline(), process.stdout.readline()]
        assert all(line.startswith("VALID") for line in first), first
        process.send_signal(signal.SIGINT)
        printed = (first[0] + first[1] + process.stdout.read()).splitlines()
        process.wait(timeout=60)
        process.stdout.close()
        stderr.seek(0)
        err = stderr.read()
    assert process.returncode == 130
    assert "Traceback" not in err
    assert 2 <= len(printed) < total
    assert all(line.split()[0] == "VALID" for line in printed)
    assert err.strip().splitlines()[-1] == f"interrupted: {len(printed)} of {total} answered"


def test_python_client_raises_interrupted_with_partial(server, tmp_path, sigint_default):
    script = (
        "import os, signal, threading, time\n"
        "from leanrpc.client import Client, Interrupted\n"
        f"codes = [f'--@standin: burn=0.4\\ntheorem u{{n}} : {{n}} = {{n}} := rfl' for n in range(20)]\n"
        "got = []\n"
        "def hit(n, r):\n"
        "    got.append(n)\n"
        "    if len(got) == 2: os.kill(os.getpid(), signal.SIGINT)\n"
        f"with Client({server.address!r}) as c:\n"
        "    try:\n"
        "        c.verify(codes, on_result=hit)\n"
        "    except Interrupted as exc:\n"
        "        print(len(exc.partial) >= 2, exc.total, isinstance(exc, KeyboardInterrupt))\n"
    )
    python = os.path.join(os.path.dirname(LEANRPC), "python")
    done = subprocess.run(
        [python, "-c", script], capture_output=True, text=True, timeout=60, env=clean_env()
    )
    assert done.stdout.split() == ["True", "20", "True"], done.stderr
    # Not caught: the traceback ends in the client's own error, with the count.
    uncaught = script.replace(
        "    try:\n        c.verify(codes, on_result=hit)\n", "    c.verify(codes, on_result=hit)\n"
    )
    uncaught = uncaught[: uncaught.index("    except Interrupted")]
    done = subprocess.run(
        [python, "-c", uncaught], capture_output=True, text=True, timeout=60, env=clean_env()
    )
    assert done.returncode != 0
    assert re.fullmatch(
        r"leanrpc\.client\._types\.Interrupted: interrupted: \d+ of 20 answered",
        done.stderr.strip().splitlines()[-1],
    ), done.stderr


def test_absurd_cache_size_is_refused_by_the_config_schema(tmp_path):
    (tmp_path / "c.toml").write_text("[cache]\nmemory_mb = 1e12\n")
    done = leanrpc("serve", "--config", str(tmp_path / "c.toml"), "--port", "0")
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert (
        line.startswith("leanrpc serve: error: ") and "memory_mb" in line and "1048576" in line
    ), line


def test_progress_bar_ships_with_the_server_package():
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    server = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    client = tomllib.loads((root / "clients/python/pyproject.toml").read_text())["project"][
        "dependencies"
    ]
    tqdm = [d for d in client if d.startswith("tqdm")]
    assert tqdm and tqdm[0] in server  # the same requirement in both distributions
    # What `pip install -e .` (the README's install, no extra) installed: tqdm, with no marker.
    from importlib.metadata import requires

    assert any(r.startswith("tqdm") and ";" not in r for r in requires("leanrpc")), requires(
        "leanrpc"
    )


def test_token_against_a_server_without_tokens_says_so_in_one_line(server, tmp_path):
    (tmp_path / "a.lean").write_text(GOOD)
    done = leanrpc(
        "verify",
        "--server",
        server.address,
        "--token",
        "s3cret",
        "--quiet",
        str(tmp_path / "a.lean"),
    )
    assert done.returncode == 0, done.stderr
    assert (
        done.stderr
        == f"leanrpc verify: warning: the server at {server.address} checks no tokens; --token is not used\n"
    )
    assert done.stdout.startswith("VALID ")


def test_token_against_a_server_with_tokens_is_used_quietly(tmp_path):
    config = tmp_path / "auth.toml"
    config.write_text('[server]\nauth_tokens = ["s3cret-token-0123456789"]\n')
    with_tokens = Served("--config", str(config))
    try:
        (tmp_path / "a.lean").write_text(GOOD)
        done = leanrpc(
            "verify",
            "--server",
            with_tokens.address,
            "--token",
            "s3cret-token-0123456789",
            "--quiet",
            str(tmp_path / "a.lean"),
        )
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        refused = leanrpc(
            "verify", "--server", with_tokens.address, "--quiet", str(tmp_path / "a.lean")
        )
        assert (
            with_tokens.process.poll() is None
        )  # the server is still up (it once died of SIGSEGV here)
        assert refused.returncode == 2 and "wants a token" in refused.stderr
    finally:
        with_tokens.stop()
