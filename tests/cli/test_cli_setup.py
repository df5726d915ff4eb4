"""`leanrpc setup` without a network (issue 29 case 1): it stops at the step
that failed, in one line that says why and what to do offline, exit status 1;
what ran before it is on stdout, the failing tool's own words on stderr above
the line. Fake `curl`, `git` and `elan` on PATH stand for the network being down."""

from __future__ import annotations

import os
import subprocess

import pytest

from cli_support import LEANRPC

URL = "https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh"
ELAN_HINT = (
    "offline? pass --elan PATH (a local elan-init.sh), or put elan in $ELAN_HOME/bin beforehand; "
    "a toolchain already in $ELAN_HOME/toolchains is not downloaded again"
)
TOOLCHAIN_HINT = "offline? put the toolchain in $ELAN_HOME/toolchains first (a toolchain already present is skipped)"
# An elan that cannot download either.
FAILING_ELAN = '#!/bin/sh\necho "error: could not download" >&2\nexit 1\n'


def _tool(bin_dir, name: str, text: str) -> None:
    path = bin_dir / name
    path.write_text(text)
    path.chmod(0o755)


def _offline_env(tmp_path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(
        bin_dir,
        "curl",
        "#!/bin/sh\necho 'curl: (6) Could not resolve host: raw.githubusercontent.com' >&2\nexit 6\n",
    )
    _tool(
        bin_dir,
        "git",
        "#!/bin/sh\necho \"fatal: unable to access '$3/': Could not resolve host: github.com\" >&2\n"
        "exit 128\n",
    )
    env = {k: v for k, v in os.environ.items() if k not in ("ELAN_HOME",)}
    env.update(
        HOME=str(tmp_path / "home"),
        ELAN_HOME=str(tmp_path / "elan"),
        PATH=f"{bin_dir}:/usr/bin:/bin",
    )
    return env


def _installer(tmp_path, elan_text: str | None) -> str:
    """A local elan-init.sh; it installs `elan_text` as elan (None: installs nothing, exits 0)."""
    path = tmp_path / "elan-init.sh"
    body = "#!/bin/sh\n"
    if elan_text is not None:
        body += (
            'mkdir -p "$ELAN_HOME/bin"\n'
            f"cat > \"$ELAN_HOME/bin/elan\" <<'ELAN'\n{elan_text}ELAN\n"
            'chmod +x "$ELAN_HOME/bin/elan"\n'
        )
    path.write_text(body)
    return str(path)


def _setup(tmp_path, env, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LEANRPC, "setup", "--lean", "v4.19.0", "--workdir", str(tmp_path / "w"), *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize("debug", [False, True])
def test_failed_download_stops_at_the_elan_step_in_one_line(tmp_path, debug):
    done = _setup(tmp_path, _offline_env(tmp_path), *(["--debug"] if debug else []))
    assert done.returncode == 1, done.stderr
    # Printed before the line: the step that started and its command (stdout), curl's own words (stderr).
    installer = tmp_path / "w" / "elan-init.sh"
    assert done.stdout.splitlines() == [
        "[1/7] elan: install the Lean version manager ...",
        f"      curl -sSfL {URL} -o {installer}",
    ]
    line = (
        f"leanrpc setup: error: [1/7] elan failed: `curl -sSfL {URL} -o {installer}` exited with status 6; "
        + ELAN_HINT
    )
    err = done.stderr.strip().splitlines()
    assert err[-1] == line  # with --debug too: no "run again with --debug"
    if debug:
        assert err[0] == "curl: (6) Could not resolve host: raw.githubusercontent.com"
        assert "Traceback (most recent call last):" in done.stderr and "StepFailed" in done.stderr
    else:
        assert err == ["curl: (6) Could not resolve host: raw.githubusercontent.com", line]


def test_local_installer_then_the_toolchain_step_fails(tmp_path):
    done = _setup(tmp_path, _offline_env(tmp_path), "--elan", _installer(tmp_path, FAILING_ELAN))
    assert done.returncode == 1, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "[1/7] elan: install the Lean version manager ..."
    assert out[2].startswith("[1/7] elan: done in ") and "curl" not in done.stdout
    assert out[-1] == "      elan toolchain install leanprover/lean4:v4.19.0"
    assert done.stderr.strip().splitlines() == [
        "error: could not download",
        "leanrpc setup: error: [2/7] toolchain failed: `elan toolchain install leanprover/lean4:v4.19.0` "
        f"exited with status 1; {TOOLCHAIN_HINT}",
    ]


def test_an_installer_that_installs_nothing_fails_at_its_own_step(tmp_path):
    done = _setup(tmp_path, _offline_env(tmp_path), "--elan", _installer(tmp_path, None))
    assert done.returncode == 1, done.stderr
    assert "done in" not in done.stdout  # the step does not claim success
    assert done.stderr.strip().splitlines() == [
        f"leanrpc setup: error: [1/7] elan failed: its commands succeeded, but there is no `elan` in "
        f"{tmp_path}/elan/bin or on PATH; {ELAN_HINT}"
    ]


def test_a_toolchain_already_present_is_skipped_and_the_repl_checkout_says_what_to_do(tmp_path):
    env = _offline_env(tmp_path)
    (tmp_path / "elan" / "toolchains" / "leanprover--lean4---v4.19.0").mkdir(parents=True)
    done = _setup(tmp_path, env, "--elan", _installer(tmp_path, FAILING_ELAN))
    assert done.returncode == 1, done.stderr
    out = done.stdout.splitlines()
    assert "[2/7] toolchain: already done, skipped (install Lean v4.19.0)" in out
    assert any(line.startswith("[3/7] project: done in ") for line in out)
    repl = tmp_path / "w" / "repl"
    err = done.stderr.strip().splitlines()
    assert err[-1] == (
        f"leanrpc setup: error: [4/7] repl-source failed: `git clone https://github.com/leanprover-community/repl "
        f"{repl}` exited with status 128; offline? put a checkout of the REPL in WORKDIR/repl "
        "(git fetch then needs no network only if the tag is there)"
    )
    assert err[:-1] == [f"fatal: unable to access '{repl}/': Could not resolve host: github.com"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--elan", "MISSING"], "argument --elan: MISSING: no such file"),
        (
            ["--lean", "latest"],
            "argument --lean: 'latest' is not a Lean release tag such as v4.19.0 or v4.20.0-rc2",
        ),
        (
            ["--lean", ""],
            "argument --lean: '' is not a Lean release tag such as v4.19.0 or v4.20.0-rc2",
        ),
        (["--workers", "-1"], "argument --workers: -1 must be 1 or more"),
        (["--workers", "0"], "argument --workers: 0 must be 1 or more"),
        (
            ["--repl-rev", ""],
            "argument --repl-rev: '' is not a git revision (a tag, branch or commit)",
        ),
        (["--project", "MISSING"], "argument --project: MISSING: no such folder"),
    ],
)
def test_bad_values_are_usage_errors_before_any_step(tmp_path, args, says):
    args = [a.replace("MISSING", str(tmp_path / "nope")) for a in args]
    says = says.replace("MISSING", str(tmp_path / "nope"))
    done = _setup(tmp_path, _offline_env(tmp_path), *args)
    assert done.returncode == 2
    assert done.stdout == ""  # no step began
    assert len(done.stderr.strip().splitlines()) == 1  # one line, no usage block
    assert done.stderr.strip().splitlines()[-1] == f"leanrpc setup: error: {says}"
    assert not (tmp_path / "w").exists()


def test_internal_error_with_debug_does_not_say_run_again_with_debug(tmp_path):
    script = (
        "import sys\nfrom leanrpc.commands import main, verify\n"
        "def boom(args): raise RuntimeError('boom')\n"
        "verify.run = boom\nsys.exit(main(sys.argv[1:]))\n"
    )
    python = os.path.join(os.path.dirname(LEANRPC), "python")
    plain = subprocess.run(
        [python, "-c", script, "verify", "x.lean"], capture_output=True, text=True, timeout=60
    )
    debug = subprocess.run(
        [python, "-c", script, "verify", "x.lean", "--debug"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plain.returncode == debug.returncode == 3
    assert plain.stderr.strip() == (
        "leanrpc verify: internal error: RuntimeError: boom "
        "(run again with --debug for the traceback, and please report it)"
    )
    assert "Traceback" in debug.stderr
    assert (
        debug.stderr.strip().splitlines()[-1]
        == "leanrpc verify: internal error: RuntimeError: boom (please report it)"
    )
