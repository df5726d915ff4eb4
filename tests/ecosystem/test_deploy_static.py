"""Deployment files, checked statically (no Docker engine or cluster here)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from leanrpc.cli import main as cli_main
from leanrpc.client import HEADER_HASH_KEY

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def k8s_documents() -> list[dict]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def by_kind(kind: str, name: str) -> dict:
    return next(d for d in k8s_documents() if d["kind"] == kind and d["metadata"]["name"] == name)


def test_manifests_parse_and_kustomization_lists_them():
    docs = k8s_documents()
    assert all("apiVersion" in d and "kind" in d for d in docs)
    kustomization = next(d for d in docs if d["kind"] == "Kustomization")
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}


def test_envoy_hashes_on_the_header_the_clients_set():
    config = yaml.safe_load(by_kind("ConfigMap", "leanrpc-envoy")["data"]["envoy.yaml"])
    [cluster] = config["static_resources"]["clusters"]
    assert cluster["lb_policy"] == "RING_HASH"
    address = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"][
        "socket_address"
    ]
    headless = by_kind("Service", "leanrpc-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert address["address"] == "leanrpc-headless"
    assert address["port_value"] in [p["port"] for p in headless["spec"]["ports"]]
    [listener] = config["static_resources"]["listeners"]
    manager = listener["filter_chains"][0]["filters"][0]["typed_config"]
    [route] = manager["route_config"]["virtual_hosts"][0]["routes"]
    assert route["route"]["cluster"] == cluster["name"]
    assert route["route"]["hash_policy"] == [{"header": {"header_name": HEADER_HASH_KEY}}]
    assert cluster["health_checks"][0]["grpc_health_check"]["service_name"] == "leanrpc.v1.Verifier"


def test_deployment_ports_probes_and_metrics_agree():
    deployment = by_kind("Deployment", "leanrpc")
    pod = deployment["spec"]["template"]
    [container] = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    command = container["args"][-1]
    assert f"--port {ports['grpc']}" in command
    assert f"--metrics-port {ports['metrics']}" in command
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(ports["metrics"])
    assert container["readinessProbe"]["grpc"]["port"] == ports["grpc"]
    secret_ref = container["env"][0]["valueFrom"]["secretKeyRef"]
    assert container["env"][0]["name"] == "LEANRPC_TOKENS"  # the server's default auth_token_env
    assert by_kind("Secret", secret_ref["name"])["stringData"][secret_ref["key"]]
    # The serve flags exist (parse them the way the CLI would).
    argv = shlex.split(command.replace('"$LEANRPC_CONFIG"', "x.toml"))[1:]
    assert argv[0] == "leanrpc" and argv[1] == "serve"


def test_dockerfile_copies_existing_paths_and_uses_real_cli_flags(tmp_path):
    text = DOCKERFILE.read_text()
    for source in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for item in source.split():
            assert (ROOT / item).exists(), item
    assert re.search(r'^ARG LEAN_VERSION=""$', text, re.M)
    assert "EXPOSE 50051 9090" in text
    # The setup line of the build runs against this CLI: rerun it as a dry run.
    setup = re.search(r"leanrpc setup (.*?)--output", text, re.S).group(1)
    flags = (
        setup.replace("\\\n", " ")
        .replace('"$LEAN_VERSION"', "v4.19.0")
        .replace('"$REPL"', "upstream")
    )
    flags = re.sub(r"\$\( \[ \"\$MATHLIB\" = \"1\" \] && echo --mathlib \)", "--mathlib", flags)
    flags = re.sub(
        r"\$\( \[ -n \"\$REPL_REV\" \] && echo --repl-rev \"\$REPL_REV\" \)",
        "--repl-rev v4.19.0",
        flags,
    )
    flags = flags.replace("/home/leanrpc/lean", str(tmp_path / "lean"))
    argv = ["setup", *shlex.split(flags), "--output", str(tmp_path / "c.toml"), "--dry-run"]
    assert cli_main(argv) == 0
