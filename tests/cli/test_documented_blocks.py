"""Every runnable code block of README.md and docs/*.md runs as written (issue 41 item 14).

The blocks are extracted from the Markdown itself, so a changed example is
tested as it reads. What runs here:

* ```python: in a fresh interpreter, against one `leanrpc serve` on the
  stand-in (the documented addresses, 127.0.0.1:50051 and the two sharding
  examples' hosts, are pointed at it; `Client.local` blocks start their own);
* ```js: with node, `require('@leanrpc/client')` resolved to clients/node;
* ```toml: parsed, and a block naming leanrpc sections loads into the config
  schema (unknown keys and wrong types fail);
* ```json: parsed.

A python or js block that cannot run here says so on the line before its
fence, `<!-- docs-test: skip (reason) -->`, and is still compiled; an API
listing says `<!-- docs-test: reference (...) -->`. Shell blocks drive real
Lean, the network or a cluster, and lean blocks are Lean text whose verdict
needs real Lean (tests/cli/test_cli_readme_standin.py reads the README's
stand-in examples): neither runs here.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from cli_support import LEANRPC, clean_env

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"(?ms)^```(\w+)[^\n]*\n(.*?)^```[ \t]*$")
MARKER = re.compile(r"<!-- docs-test: (skip|reference) \((.+?)\) -->\s*$")
ADDRESSES = ("127.0.0.1:50051", "10.0.0.1:50051", "10.0.0.2:50051")


@dataclasses.dataclass
class Block:
    where: str
    language: str
    text: str
    marker: str = ""  # "skip" / "reference": not run here (the reason is required)

    def __repr__(self) -> str:
        return self.where


def _blocks() -> list[Block]:
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text[: match.start()].count("\n") + 1
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = MARKER.search(before)
            found.append(
                Block(
                    f"{doc.relative_to(ROOT)}:{line}",
                    match.group(1).lower(),
                    match.group(2),
                    marker.group(1) if marker else "",
                )
            )
    return found


BLOCKS = _blocks()
PYTHON = [b for b in BLOCKS if b.language == "python"]
JS = [b for b in BLOCKS if b.language in ("js", "javascript")]
TOML = [b for b in BLOCKS if b.language == "toml"]
JSON = [b for b in BLOCKS if b.language == "json"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server on the stand-in, with the `legacy` profile the examples name."""
    folder = tmp_path_factory.mktemp("docs-server")
    config = folder / "leanrpc.toml"
    config.write_text('[repl.legacy]\nproject_revision = "docs example"\n')
    process = subprocess.Popen(
        [LEANRPC, "serve", "--port", "0", "--workers", "2", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=clean_env(),
        start_new_session=True,
    )
    line = process.stdout.readline()
    assert line.startswith("leanrpc listening on "), line
    yield line.split()[-1]
    process.terminate()
    process.wait(timeout=60)


def test_the_documentation_has_runnable_blocks_of_each_kind():
    assert len(PYTHON) >= 8 and JS and len(TOML) >= 8
    runnable = [b for b in PYTHON + JS if not b.marker]
    assert len(runnable) >= 6, runnable
    assert BLOCKS[0].where.startswith("README.md")


def _pointed(text: str, address: str) -> str:
    for documented in ADDRESSES:
        text = text.replace(documented, address)
    return text


@pytest.mark.parametrize("block", PYTHON, ids=repr)
def test_python_blocks_run_as_written(block, server, tmp_path):
    if block.marker == "reference":  # signatures, not a program
        return
    ast.parse(block.text, block.where)  # a skipped block is still Python
    if block.marker:
        return
    script = tmp_path / "block.py"
    script.write_text(_pointed(block.text, server))
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env=clean_env(),
    )
    assert done.returncode == 0, f"{block.where} failed:\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("block", JS, ids=repr)
def test_js_blocks_run_as_written(block, server, node_client, tmp_path):
    text = _pointed(block.text, server).replace(
        "require('@leanrpc/client')", f"require({json.dumps(str(node_client))})"
    )
    script = tmp_path / "block.js"
    script.write_text(text)
    check = subprocess.run(["node", "--check", str(script)], capture_output=True, text=True)
    assert check.returncode == 0, f"{block.where} is not valid CommonJS:\n{check.stderr}"
    if block.marker:
        return
    done = subprocess.run(
        ["node", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, f"{block.where} failed:\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("block", TOML, ids=repr)
def test_toml_blocks_parse_and_fit_the_config_schema(block):
    """Loaded as `leanrpc serve --config` loads a file (Config.from_dict): unknown
    sections or keys and wrong types fail. Paths in them need not exist here."""
    from leanrpc.config import Config, ConfigError

    try:
        Config.from_dict(tomllib.loads(block.text))
    except (ConfigError, tomllib.TOMLDecodeError) as exc:
        pytest.fail(f"{block.where}: {exc}")


@pytest.mark.parametrize("block", JSON, ids=repr)
def test_json_blocks_parse(block):
    json.loads(block.text)


def test_every_skip_says_why():
    for block in BLOCKS:
        if block.marker:
            assert block.language in ("python", "js", "javascript"), block
    assert not [b for b in PYTHON + JS if b.marker and "docs-test" in b.text]


def test_the_readme_first_python_example_is_client_local():
    first = next(b for b in PYTHON if b.where.startswith("README.md"))
    assert "Client.local(" in first.text and not first.marker


def test_the_readmes_lean_version_has_every_published_kernel_fix():
    """Issue 41 item 3: setup, doctor, serve and the sample config name one version,
    and the server's soundness list has nothing to warn about for it."""
    from leanrpc.repl.probes import soundness_warning

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    used = set(
        re.findall(
            r"(?:--lean |lean-|checkout |revision = \"(?:mathlib )?)(v\d+\.\d+\.\d+)", readme
        )
    )
    assert len(used) == 1, used
    [version] = used
    assert soundness_warning(version) == "", soundness_warning(version)
    assert "Which Lean" in readme and soundness_warning("v4.19.0")  # the old one is named unsound


def test_the_readme_extract_example_prints_what_it_says(tmp_path):
    """Issue 41 item 12: an Extract example, whose printed steps (the stand-in's
    `·` step kind included, once cut short to `Lean.Parser.Tactic.`) are the
    comment lines under it."""
    [block] = [b for b in PYTHON if b.where.startswith("README.md") and ".extract(" in b.text]
    said = [line[2:] for line in block.text.splitlines() if line.startswith("# ")]
    assert len(said) == 3 and "Lean.cdot" in said[1]
    script = tmp_path / "extract.py"
    script.write_text(block.text)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=clean_env()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == said


def test_the_prover_page_opens_with_an_example():
    """Issue 41 item 13: an example before the implementation detail."""
    text = (ROOT / "docs" / "PROVER.md").read_text(encoding="utf-8")
    assert text.index("```python") < text.index("## The model")
