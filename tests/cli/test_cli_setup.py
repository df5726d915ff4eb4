"""`leanrpc setup` without a network (issue 29): it stops at the step that
failed, says why and what to do offline, exits 1. A fake `curl` and `elan`
on PATH stand for the network being down."""

from __future__ import annotations

import os
import subprocess

from cli_support import LEANRPC


def _offline_env(tmp_path, *, elan_fails: bool = False) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    curl = bin_dir / "curl"
    curl.write_text("#!/bin/sh\necho 'curl: (6) Could not resolve host: raw.githubusercontent.com' >&2\nexit 6\n")
    curl.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("ELAN_HOME",)}
    env.update(HOME=str(tmp_path / "home"), ELAN_HOME=str(tmp_path / "elan"), PATH=f"{bin_dir}:/usr/bin:/bin")
    return env


def _setup(tmp_path, env, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([LEANRPC, "setup", "--lean", "v4.19.0", "--workdir", str(tmp_path / "w"), *extra],
                          capture_output=True, text=True, env=env, timeout=60)


def test_failed_download_stops_at_the_elan_step(tmp_path):
    done = _setup(tmp_path, _offline_env(tmp_path))
    assert done.returncode == 1, done.stderr
    assert "done in" not in done.stdout  # no step claims success
    assert done.stdout.splitlines()[0].startswith("[1/")
    assert "Traceback" not in done.stderr
    err = done.stderr.strip().splitlines()
    assert err[-2].startswith("setup failed: [1/") and "elan failed: `curl -sSfL " in err[-2]
    assert err[-2].endswith("exited with status 6")
    assert err[-1] == "offline? pass --elan PATH (a local elan-init.sh), or install elan into $ELAN_HOME beforehand"


def test_local_installer_then_the_toolchain_step_fails(tmp_path):
    env = _offline_env(tmp_path)
    installer = tmp_path / "elan-init.sh"
    # A local installer that puts an `elan` in place which cannot download either.
    installer.write_text(
        '#!/bin/sh\nmkdir -p "$ELAN_HOME/bin"\n'
        'printf "#!/bin/sh\\necho \\"error: could not download\\" >&2\\nexit 1\\n" > "$ELAN_HOME/bin/elan"\n'
        'chmod +x "$ELAN_HOME/bin/elan"\n')
    done = _setup(tmp_path, env, "--elan", str(installer))
    assert done.returncode == 1, done.stderr
    assert "elan: done in" in done.stdout and "curl" not in done.stdout
    err = done.stderr.strip().splitlines()
    assert err[-2] == "setup failed: [2/7] toolchain failed: `elan toolchain install leanprover/lean4:v4.19.0` exited with status 1"
    assert err[-1].startswith("offline? put the toolchain in $ELAN_HOME/toolchains first")


def test_missing_local_installer_is_one_line(tmp_path):
    done = _setup(tmp_path, _offline_env(tmp_path), "--elan", str(tmp_path / "nope.sh"))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"setup failed: --elan {tmp_path / 'nope.sh'}: no such file (give a local elan-init.sh)"]


def test_internal_error_with_debug_does_not_say_run_again_with_debug(tmp_path):
    script = ("import sys\nfrom leanrpc.commands import main, verify\n"
              "def boom(args): raise RuntimeError('boom')\n"
              "verify.run = boom\nsys.exit(main(sys.argv[1:]))\n")
    python = os.path.join(os.path.dirname(LEANRPC), "python")
    plain = subprocess.run([python, "-c", script, "verify", "x.lean"], capture_output=True, text=True, timeout=60)
    debug = subprocess.run([python, "-c", script, "verify", "x.lean", "--debug"], capture_output=True, text=True, timeout=60)
    assert plain.returncode == debug.returncode == 3
    assert plain.stderr.strip() == ("leanrpc verify: internal error: RuntimeError: boom "
                                    "(run again with --debug for the traceback, and please report it)")
    assert "Traceback" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == "leanrpc verify: internal error: RuntimeError: boom (please report it)"
