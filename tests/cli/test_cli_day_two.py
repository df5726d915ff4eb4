"""Issue 41, what a user meets after the README: the real `leanrpc` command
against a real server (items 1, 2 and 5)."""

from __future__ import annotations

import json
import subprocess

import pytest

from cli_support import BAD, GOOD, LEANRPC, Served, clean_env, leanrpc


@pytest.fixture(scope="module")
def server():
    served = Served()
    yield served
    served.stop()


def _folder(tmp_path, n: int):
    folder = tmp_path / "long"
    folder.mkdir()
    for k in range(n):
        (folder / f"p{k}.lean").write_text(GOOD.replace("theorem t", f"theorem t{k}"))
    return folder


@pytest.mark.parametrize("as_json", [False, True])
def test_piping_into_head_is_a_normal_end(server, tmp_path, as_json):
    """`leanrpc verify long/ | head -1`: the reader leaves after one line; no
    'internal error: BrokenPipeError', exit 0, nothing on stderr but the end."""
    folder = _folder(tmp_path, 12)
    extra = ["--json"] if as_json else []
    process = subprocess.Popen(
        [LEANRPC, "verify", str(folder), "--server", server.address, "--quiet", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    first = process.stdout.readline()
    process.stdout.close()  # what `head -1` does after its line
    _out, err = process.communicate(timeout=120)
    assert first.startswith("{" if as_json else "VALID")
    assert "BrokenPipeError" not in err and "internal error" not in err, err
    assert "Exception ignored" not in err, err
    assert process.returncode == 0, err


def test_a_broken_repl_command_is_unavailable_exit_2_not_rejected_proofs(tmp_path):
    served = Served("--repl-cmd", str(tmp_path / "no-such-repl"))
    try:
        (tmp_path / "good.lean").write_text(GOOD)
        done = leanrpc("verify", str(tmp_path / "good.lean"), "--server", served.address)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "REJECTED" not in done.stdout and "0 of 1 valid" not in done.stdout
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("leanrpc verify: error: UNAVAILABLE: the server at ")
        assert "cannot start a REPL worker" in line and "--repl-cmd" in line
        # The reason names the cause once, on one line (no raw stderr tail in it).
        assert line.count("No such file or directory") == 1, line
        from leanrpc.client import Client, ClientError

        with Client(served.address, max_retries=0) as client:
            info = client.server_info()
            assert "\n" not in info.not_serving_reason
            assert info.not_serving_reason.count("No such file or directory") == 1
            with pytest.raises(ClientError) as refused:
                client.verify([GOOD])
            assert refused.value.code.name == "UNAVAILABLE"
            assert refused.value.reason == "NOT_SERVING"
    finally:
        served.stop()


def test_a_server_side_refusal_prints_its_reason_not_empty_parentheses(server, tmp_path):
    (tmp_path / "good.lean").write_text(GOOD)
    done = leanrpc(
        "verify", str(tmp_path / "good.lean"), "--server", server.address, "--timeout", "100000"
    )
    assert done.returncode == 1
    [line] = [x for x in done.stdout.splitlines() if x.startswith("REJECTED")]
    assert "()" not in line
    assert "timeout" in line.split("good.lean", 1)[1], line


def test_json_lines_have_one_schema_for_refused_files_and_server_results(server, tmp_path):
    (tmp_path / "good.lean").write_text(GOOD)
    (tmp_path / "bad.lean").write_text(BAD)
    (tmp_path / "empty.lean").write_text("")
    done = leanrpc("verify", str(tmp_path), "--server", server.address, "--json", "--quiet")
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(r["status"] for r in records) == ["INVALID", "REJECTED", "VALID"]
    keys = {frozenset(r) for r in records}
    assert len(keys) == 1, [sorted(k) for k in keys]
    refused = next(r for r in records if r["status"] == "REJECTED")
    assert refused["messages"] == [] and "empty" in refused["error"]
    # Code reading every record's messages works on each.
    assert all(isinstance(r["messages"], list) for r in records)


TOKEN = "s3cret-token-0123456789"


def _verify_with_env(address: str, path, *extra: str, env_token: str | None = None):
    env = clean_env()
    if env_token is not None:
        env["LEANRPC_TOKEN"] = env_token
    return subprocess.run(
        [LEANRPC, "verify", "--server", address, "--quiet", str(path), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_tokens_from_a_file_or_the_environment_and_a_wrong_one_said_so(tmp_path):
    config = tmp_path / "leanrpc.toml"
    config.write_text(f'[server]\nauth_tokens = ["{TOKEN}"]\n')
    with_tokens = Served("--config", str(config))
    try:
        (tmp_path / "a.lean").write_text(GOOD)
        wrong = _verify_with_env(with_tokens.address, tmp_path / "a.lean", "--token", "wrong")
        assert wrong.returncode == 2
        assert "refused the token from --token" in wrong.stderr
        assert "wants a token" not in wrong.stderr and "pass --token" not in wrong.stderr
        from_env = _verify_with_env(with_tokens.address, tmp_path / "a.lean", env_token=TOKEN)
        assert from_env.returncode == 0, from_env.stderr
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN + "\n")
        from_file = _verify_with_env(
            with_tokens.address, tmp_path / "a.lean", "--token-file", str(token_file)
        )
        assert from_file.returncode == 0, from_file.stderr
        wrong_env = _verify_with_env(with_tokens.address, tmp_path / "a.lean", env_token="nope")
        assert wrong_env.returncode == 2 and "refused the token from $LEANRPC_TOKEN" in (
            wrong_env.stderr
        )
        none = _verify_with_env(with_tokens.address, tmp_path / "a.lean")
        assert none.returncode == 2 and "set $LEANRPC_TOKEN" in none.stderr
    finally:
        with_tokens.stop()


def test_the_python_client_warns_of_a_token_the_server_does_not_check(server):
    from leanrpc.client import Client

    with pytest.warns(UserWarning, match="checks no tokens; token= is not used"):
        with Client(server.address, token=TOKEN) as client:
            assert client.verify([GOOD])[0].status == "VALID"
