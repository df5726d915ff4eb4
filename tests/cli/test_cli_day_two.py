"""Issue 41, what a user meets after the README: the real `leanrpc` command
against a real server (items 1, 2 and 5)."""

from __future__ import annotations

import json
import subprocess

import pytest

from cli_support import BAD, GOOD, LEANRPC, Served, clean_env, leanrpc
from testkit import free_port


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


def test_a_server_side_refusal_prints_its_reason_not_empty_parentheses(tmp_path):
    config = tmp_path / "leanrpc.toml"
    config.write_text("[pool]\nmax_timeout_s = 5\n")
    served = Served("--config", str(config))
    try:
        (tmp_path / "good.lean").write_text(GOOD)
        done = leanrpc(
            "verify", str(tmp_path / "good.lean"), "--server", served.address, "--timeout", "50"
        )
    finally:
        served.stop()
    assert done.returncode == 1
    [line] = [x for x in done.stdout.splitlines() if x.startswith("REJECTED")]
    assert "()" not in line
    assert "timeout" in line.split("good.lean", 1)[1], line


def test_a_timeout_over_the_servers_maximum_is_a_usage_error(tmp_path):
    (tmp_path / "good.lean").write_text(GOOD)
    done = leanrpc("verify", str(tmp_path / "good.lean"), "--timeout", "1e9")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        "leanrpc verify: error: argument --timeout: 1e9 s is over the server's maximum; "
        "give 0 (the server's default) to 3600 seconds ([pool] max_timeout_s)\n"
    )


def test_json_times_are_never_in_exponent_form(server, tmp_path):
    (tmp_path / "good.lean").write_text(GOOD)
    (tmp_path / "empty.lean").write_text("")
    done = leanrpc("verify", str(tmp_path), "--server", server.address, "--json", "--quiet")
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout + done.stderr
    for line in lines:
        record = json.loads(line)
        times = [key for key in record if key.startswith("time_")]
        assert "time_total_s" in times
        for key in times:
            written = line.split(f'"{key}": ', 1)[1].split(",", 1)[0]
            assert "e" not in written.lower(), (key, written)
            assert float(written) == record[key]


def test_a_time_below_a_tenth_of_a_millisecond_is_written_fixed():
    import dataclasses

    from leanrpc.commands.verify_output import json_record, refused_result

    result = dataclasses.replace(refused_result("a.lean", "x"), time_total_s=8.929e-05)
    assert json.dumps(result.to_dict()).count("e-05") == 1  # what json does by itself
    written = json.dumps(json_record(result))
    assert '"time_total_s": 0.0001' in written and "e-0" not in written


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


# -- item 11: the verify CLI's inputs ------------------------------------------------


def _json_lines(done) -> list[dict]:
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def test_stdin_is_a_snippet(server):
    done = subprocess.run(
        [LEANRPC, "verify", "-", "--server", server.address, "--quiet"],
        input=GOOD,
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("VALID          -  (")


def test_a_records_file_is_never_sent_as_code_and_field_reads_it(server, tmp_path):
    records = tmp_path / "data.jsonl"
    rows = [
        {"name": "good", "proof": GOOD, "formal_statement": GOOD.replace("rfl", "sorry")},
        {"name": "bad", "proof": BAD, "formal_statement": BAD.split(":=")[0] + ":= by sorry\n"},
        {"name": "nocode"},
    ]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    plain = leanrpc("verify", str(records), "--server", server.address, "--quiet")
    assert plain.returncode == 1
    [line] = plain.stdout.splitlines()[:1]
    assert line.startswith("REJECTED") and "holds JSON records, not Lean code" in line
    assert "pass --field NAME" in line and "formal_statement, name, proof" in line

    done = leanrpc(
        "verify", str(records), "--server", server.address, "--quiet", "--json",
        "--field", "proof", "--id-field", "name", "--reference-field", "formal_statement",
    )  # fmt: skip
    by_id = {r["id"]: r for r in _json_lines(done)}
    assert by_id["good"]["status"] == "VALID" and by_id["good"]["reference"]["passed"]
    assert by_id["bad"]["status"] == "INVALID"
    assert by_id["nocode"]["status"] == "REJECTED"
    assert "data.jsonl:3: the record has no field 'proof' (--field)" in by_id["nocode"]["error"]
    assert done.returncode == 1

    # A datasets-style .json (a list of records): ids FILE:N.
    as_list = tmp_path / "data.json"
    as_list.write_text(json.dumps([{"code": GOOD}, {"code": GOOD.replace("t ", "u ")}]))
    listed = leanrpc("verify", str(as_list), "--server", server.address, "--field", "code")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert f"{as_list}:1" in listed.stdout and f"{as_list}:2" in listed.stdout


def test_profile_no_cache_and_an_output_file(server, tmp_path):
    (tmp_path / "a.lean").write_text(GOOD.replace("theorem t", "theorem cached_once"))
    first = leanrpc("verify", str(tmp_path / "a.lean"), "--server", server.address, "--json")
    again = leanrpc("verify", str(tmp_path / "a.lean"), "--server", server.address, "--json")
    assert _json_lines(again)[0]["cache_source"] == "memory", (first.stdout, again.stdout)
    fresh = leanrpc(
        "verify", str(tmp_path / "a.lean"), "--server", server.address, "--json", "--no-cache"
    )
    assert _json_lines(fresh)[0]["cache_source"] == ""
    assert _json_lines(fresh)[0]["status"] == "VALID"
    unknown = leanrpc(
        "verify", str(tmp_path / "a.lean"), "--server", server.address, "--profile", "nosuch"
    )
    assert unknown.returncode == 1 and "nosuch" in unknown.stdout, unknown.stdout
    out = tmp_path / "results.jsonl"
    written = leanrpc(
        "verify", str(tmp_path / "a.lean"), "--server", server.address, "--json", "-o", str(out)
    )
    assert written.returncode == 0 and written.stdout == ""
    assert json.loads(out.read_text().splitlines()[0])["status"] == "VALID"


# -- item 8: how `leanrpc serve` ends ---------------------------------------------------


@pytest.mark.parametrize(("sig", "status"), [("SIGINT", 130), ("SIGTERM", 0)])
def test_serve_ends_with_a_line_and_ctrl_c_is_130(sig, status):
    import signal

    served = Served()
    try:
        served.process.send_signal(getattr(signal, sig))
        out, _ = served.process.communicate(timeout=120)
        assert served.process.returncode == status, out
        assert out.strip().splitlines()[-1] == f"leanrpc stopped ({sig})"
    finally:
        served.kill()


# -- item 13: small things ----------------------------------------------------------


def test_usage_errors_are_one_line_and_ports_name_the_flag():
    done = leanrpc("verify")
    assert done.returncode == 2
    assert done.stderr == "leanrpc verify: error: the following arguments are required: PATH\n"
    port = leanrpc("serve", "--port", "70000")
    assert port.returncode == 2
    assert (
        port.stderr
        == "leanrpc serve: error: argument --port: 70000 must be a port from 0 to 65535\n"
    )


def test_config_typos_are_all_named_with_the_key_meant(tmp_path):
    config = tmp_path / "leanrpc.toml"
    config.write_text("[pool]\nworkerz = 2\n[server]\nprot = 1\n[pol]\nx = 1\n")
    done = leanrpc("serve", "--config", str(config))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "unknown config key pool.workerz (did you mean pool.workers?)" in line
    assert "unknown config key server.prot (did you mean server.port?)" in line
    assert "unknown config section [pol] (did you mean [pool]?)" in line


def test_every_wrong_config_value_is_named_at_once(tmp_path):
    config = tmp_path / "leanrpc.toml"
    config.write_text(
        '[pool]\nworkers = "x"\nqueue_limit = -1\n[server]\nport = "abc"\n'
        "[repl]\ncommand = 5\n[sessions]\nprot = 1\n"
    )
    done = leanrpc("serve", "--config", str(config))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("leanrpc serve: error: ")
    for said in (
        "config key pool.workers must be an integer number >= 1, not 'x'",
        "config key pool.queue_limit must be an integer number >= 1, not -1",
        "config key server.port must be an integer number from 0 to 65535, not 'abc'",
        "config key repl.command must be a list of strings, not 5",
        "unknown config key sessions.prot",
    ):
        assert said in line, (said, line)
    # A right config is still loaded whole (no key checked alone is refused).
    config.write_text('[pool]\nworkers = 1\nqueue_limit = 5\n[repl]\ncommand = "x y"\n')
    from leanrpc.config import Config

    loaded = Config.from_toml(config)
    assert (loaded.pool.workers, loaded.pool.queue_limit, loaded.repl.command) == (1, 5, ["x", "y"])


def test_verify_pointed_at_the_rest_port_says_it_is_an_http_port(tmp_path):
    http_port = free_port()
    served = Served("--http-port", str(http_port))
    try:
        (tmp_path / "a.lean").write_text(GOOD)
        done = leanrpc(
            "verify",
            str(tmp_path / "a.lean"),
            "--server",
            f"127.0.0.1:{http_port}",
            "--retries",
            "0",
        )
        assert done.returncode == 2
        assert f"127.0.0.1:{http_port} is an HTTP port (the REST gateway's" in done.stderr
        assert "cannot reach" not in done.stderr
    finally:
        served.stop()


def test_a_timeout_does_not_name_the_internal_batch(server, tmp_path):
    (tmp_path / "slow.lean").write_text("--@standin: hang\ntheorem t : True := trivial\n")
    done = leanrpc(
        "verify", str(tmp_path / "slow.lean"), "--server", server.address, "--timeout", "1",
        "--json", "--quiet",
    )  # fmt: skip
    [record] = _json_lines(done)
    assert record["status"] == "TIMEOUT", record
    assert "batch" not in record["error"] and "no answer within 1 s" in record["error"]


def test_a_statement_mismatch_shows_both_sides_in_text(server, tmp_path):
    (tmp_path / "ref.lean").write_text("theorem t (n : Nat) : n + 0 = n := by\n  sorry\n")
    (tmp_path / "a.lean").write_text("theorem t (n : Nat) : 0 + n = n := by\n  simp\n")
    done = leanrpc(
        "verify", str(tmp_path / "a.lean"), "--server", server.address, "--quiet",
        "--reference", str(tmp_path / "ref.lean"),
    )  # fmt: skip
    assert done.returncode == 1
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert "reference: STATEMENT_MISMATCH t" in lines
    assert any(line.startswith("reference: t :") and "n + 0 = n" in line for line in lines)
    assert any(line.startswith("snippet: t :") and "0 + n = n" in line for line in lines)
