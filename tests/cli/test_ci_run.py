"""`.ci/run`: the README's command, in a brand-new virtualenv that goes away.

The real run (install + whole suite) is the CI itself; these tests run
`.ci/run` on a copy of the checkout's README with a tiny command in place of
the suite, to check the parts that make CI honest.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CI_RUN = ROOT / ".ci" / "run"
README = ROOT / "README.md"


def _readme_block_after(marker: str, text: str) -> str:
    after = text[text.index(marker) :]
    match = re.search(r"```bash\n(.*?)\n```", after, re.S)
    assert match, f"no shell block after {marker!r}"
    return match.group(1)


def test_ci_runs_the_readme_test_command_exactly():
    text = README.read_text()
    readme_command = _readme_block_after("<!-- ci:test-command", text)
    # The block under "The two commands" that a user copies is the marked one.
    two_commands = text[text.index("## The two commands") :]
    assert two_commands.index("<!-- ci:test-command") < two_commands.index("python3 -m pytest")
    printed = subprocess.run(
        [str(CI_RUN), "--print-command"], capture_output=True, text=True, timeout=30, check=True
    )
    assert printed.stdout.strip() == readme_command
    extras = re.search(r"\.\[([\w,-]+)\]", readme_command)
    assert (
        "pip install" in readme_command
        and extras is not None
        and {"model", "test", "mcp"} <= set(extras[1].split(","))  # mcp: tests/agents
        and "pytest" in readme_command
    )


def _fake_checkout(tmp_path: Path, command: str) -> tuple[Path, dict]:
    checkout = tmp_path / "checkout"
    (checkout / ".ci").mkdir(parents=True)
    shutil.copy(CI_RUN, checkout / ".ci" / "run")
    (checkout / "README.md").write_text(
        f"# x\n\n<!-- ci:test-command -->\n```bash\n{command}\n```\n"
    )
    # The system programs are "present" (stubs), so nothing is apt-installed.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("redis-server", "node", "npm"):
        stub = bin_dir / name
        stub.write_text("#!/bin/sh\nexit 0\n")
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"
    env["TMPDIR"] = str(tmp_path)
    return checkout, env


def test_ci_uses_a_fresh_venv_in_a_temp_folder_and_removes_it(tmp_path):
    probe = (
        "python3 -c 'import sys, pathlib; assert sys.prefix != sys.base_prefix; "
        'pathlib.Path("prefix.txt").write_text(sys.prefix)\''
    )
    checkout, env = _fake_checkout(tmp_path, probe)
    done = subprocess.run(
        [str(checkout / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    prefix = Path((checkout / "prefix.txt").read_text())
    assert prefix.parent.parent == tmp_path  # $TMPDIR/leanrpc-ci.XXXXXX/venv
    assert prefix.name == "venv" and prefix != Path(sys.prefix)
    assert not prefix.parent.exists(), "the temporary venv folder was left behind"
    assert "apt-get" not in done.stderr  # every system program was there


def test_ci_fails_when_pytest_collects_nothing(tmp_path):
    checkout, env = _fake_checkout(tmp_path, "exit 5")
    done = subprocess.run(
        [str(checkout / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 5
    assert "no tests (exit 5)" in done.stderr
    assert list(tmp_path.glob("leanrpc-ci.*")) == []


def test_ci_fails_on_the_first_failing_part_of_the_command(tmp_path):
    checkout, env = _fake_checkout(tmp_path, "false && touch reached")
    done = subprocess.run(
        [str(checkout / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 1
    assert not (checkout / "reached").exists()


def test_ci_runs_the_style_gate_after_the_install_and_before_the_tests():
    command = _readme_block_after("<!-- ci:test-command", README.read_text())
    assert command.index("pip install") < command.index(".ci/lint") < command.index("pytest")
    assert (ROOT / ".ci" / "lint").is_file()


def test_the_style_gate_fails_on_unformatted_code_and_names_it(tmp_path):
    # A checkout with the project's ruff settings and one badly laid-out file;
    # --anyway runs the gate whatever its LINT_ENABLED switch says.
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "lint", tmp_path / ".ci" / "lint")
    ruff_settings = ROOT.joinpath("pyproject.toml").read_text().split("[tool.ruff]", 1)[1]
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]" + ruff_settings)
    (tmp_path / "bad.py").write_text("import sys, os\nx = {  'a':1 }\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "lint"), "--anyway"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "bad.py" in done.stdout + done.stderr
    (tmp_path / "bad.py").write_text(
        'import os\nimport sys\n\nx = {"a": 1, "os": os, "sys": sys}\n'
    )
    done = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "lint"), "--anyway"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_style_gate_is_on():
    """The whole tree went through ruff once; from then on CI refuses unformatted code."""
    text = (ROOT / ".ci" / "lint").read_text()
    assert "\nLINT_ENABLED=1\n" in text
