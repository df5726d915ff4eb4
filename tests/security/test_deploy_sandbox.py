"""The container's launch, rebuilt without a Docker engine: the sandbox is on.

Reads deploy/Dockerfile (its non-root USER and uid, the RUN line that writes
sandbox.mode, its CMD) and deploy/k8s (the pod's security context), then runs
that CMD as that uid against a config written by that RUN line, and asks the
server what sandbox it runs: unprivileged user namespaces, attacks blocked.
"""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

import grpc
import pytest
import yaml

from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc
from security_support import HEADER, unprivileged_argv
from testkit import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DOCKERFILE = os.path.join(REPO, "deploy", "Dockerfile")
K8S = os.path.join(REPO, "deploy", "k8s", "leanrpc.yaml")


def _dockerfile() -> str:
    with open(DOCKERFILE) as f:
        return f.read()


def _container_uid(text: str) -> int:
    assert re.search(r"^USER leanrpc$", text, re.M), "the image runs as a non-root user"
    return int(re.search(r"useradd .*--uid (\d+) leanrpc", text).group(1))


def _sandbox_line(text: str) -> list[str]:
    """The RUN line after the `# leanrpc-sandbox-line` marker, as argv."""
    after = text.split("# leanrpc-sandbox-line\n", 1)[1].split("\n", 1)[0]
    assert after.startswith("RUN ")
    return shlex.split(after[len("RUN ") :])


def _cmd(text: str) -> str:
    cmd = re.search(r"^CMD (\[.*\])$", text, re.M).group(1)
    import json

    argv = json.loads(cmd)
    assert argv[:2] == ["sh", "-c"]
    return argv[2]


def test_kubernetes_pod_runs_non_root_without_capabilities_and_says_why_seccomp_is_relaxed():
    with open(K8S) as f:
        docs = list(yaml.safe_load_all(f))
    (deployment,) = [d for d in docs if d and d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == _container_uid(_dockerfile())
    assert pod["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
    (container,) = pod["containers"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "add" not in container["securityContext"]["capabilities"]


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to the container's uid needs root")
def test_the_container_launch_runs_the_sandbox_as_its_non_root_uid():
    text = _dockerfile()
    uid = _container_uid(text)
    # Not under pytest's tmp_path: its parents are private to root.
    home = pathlib.Path(tempfile.mkdtemp(prefix="leanrpc-container-", dir="/tmp"))
    config = home / "leanrpc.toml"
    config.write_text(
        "# stand-in REPL (no Lean toolchain in this image)\n"
    )  # the image's stand-in branch
    argv = _sandbox_line(text)
    assert argv[0] == "python"
    subprocess.run([sys.executable, *argv[1:-1], str(config)], check=True)
    assert tomllib.loads(config.read_text())["sandbox"]["mode"] == "unshare"
    os.chown(home, uid, uid)
    os.chown(config, uid, uid)

    port, metrics_port = free_port(), free_port()
    cmd = _cmd(text).replace("50051", str(port)).replace("9090", str(metrics_port))
    bin_dir = os.path.dirname(sys.executable)
    assert os.path.exists(os.path.join(bin_dir, "leanrpc"))
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(home),
        "LEANRPC_CONFIG": str(config),
        "LEANRPC_TOKENS": "container-token",
        "LANG": "C.UTF-8",
    }
    server = subprocess.Popen(
        unprivileged_argv(["sh", "-c", cmd], uid),
        env=env,
        cwd=str(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        metadata = (("authorization", "Bearer container-token"),)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=60)
            verifier = pb_grpc.VerifierStub(channel)
            info = verifier.GetServerInfo(pb.GetServerInfoRequest(), metadata=metadata, timeout=30)
            assert info.sandbox.startswith(
                "unshare sandbox: each worker runs as the server's uid in an "
                "unprivileged user namespace"
            ), info.sandbox
            code = HEADER + "def f := 1\n--@standin: escape=write,shadow,remount\ndef g := 2\n"
            deadline = time.monotonic() + 60
            while True:
                response = verifier.Verify(
                    pb.VerifyRequest(snippets=[pb.Snippet(id="s", code=code)]),
                    metadata=metadata,
                    timeout=60,
                )
                if response.results[0].status != pb.STATUS_CRASH or time.monotonic() > deadline:
                    break
            (result,) = response.results
            assert result.status == pb.STATUS_VALID, result
            texts = [m.text for m in result.messages]
            assert texts and all(": blocked (" in t for t in texts), texts
    finally:
        server.terminate()
        try:
            output, _ = server.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            output, _ = server.communicate()
        shutil.rmtree(home, ignore_errors=True)
    assert "SANDBOX OFF" not in output, output[-3000:]
