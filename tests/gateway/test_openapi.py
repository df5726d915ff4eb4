"""The REST gateway describes itself: /openapi.json lists exactly the routes
the gateway serves, its request schemas accept what the gateway accepts, and
/docs renders it offline (issue 29 case 12). Through a real server."""

from __future__ import annotations

import json
import re

import aiohttp
import msgspec

from leanrpc.gateway import kimina, openapi
from leanrpc.gateway.server import KiminaGateway, build_app
from testkit import loopback_config


def _routes_of(app) -> set[tuple[str, str]]:
    return {
        (route.resource.canonical, route.method.lower())
        for route in app.router.routes()
        if route.method != "HEAD"
    }


def _spec_routes(document: dict) -> set[tuple[str, str]]:
    return {(path, method) for path, methods in document["paths"].items() for method in methods}


def test_the_spec_paths_are_the_gateway_routes():
    config = loopback_config(workers=1)
    app = build_app(
        KiminaGateway(verify=None, config=config), config
    )  # routes only: nothing is served
    assert _spec_routes(openapi.spec()) == _routes_of(app)


def test_the_request_schemas_are_the_decoder_s_models():
    schemas = openapi.spec()["components"]["schemas"]
    for model in (kimina.CheckRequest, kimina.VerifyRequestBody, kimina.Snippet, kimina.Code):
        schema = schemas[model.__name__]
        assert set(schema["properties"]) == set(model.__struct_fields__), model
        required = {f.name for f in msgspec.structs.fields(model) if f.required}
        assert set(schema.get("required", [])) == required, model
    assert schemas["CheckRequest"]["properties"]["timeout"]["minimum"] == 0
    # What the schema calls required, the decoder refuses without.
    try:
        kimina.decode_check(json.dumps({"snippets": [{"id": "a"}]}).encode())
        raise AssertionError("the decoder took a snippet without code")
    except kimina.RequestInvalid as exc:
        assert exc.detail[0]["loc"] == ["body", "snippets", 0]
    good = {
        "snippets": [{"id": "a", "code": "theorem t : 1 = 1 := rfl"}],
        "timeout": 30,
        "infotree": "tactics",
    }
    assert kimina.decode_check(json.dumps(good).encode()).snippets[0].id == "a"
    # Every $ref points at a schema that exists.
    text = json.dumps(openapi.spec())
    for name in re.findall(r'"#/components/schemas/([^"]+)"', text):
        assert name in schemas, name


async def test_openapi_json_and_docs_are_served_offline(served):
    s = await served(workers=1)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{s.url}/openapi.json") as answer:
            assert answer.status == 200 and answer.content_type == "application/json"
            document = await answer.json()
        async with http.get(f"{s.url}/docs") as answer:
            assert answer.status == 200 and answer.content_type == "text/html"
            page = await answer.text()
        # The example the page sends is a valid request, and gets a verdict.
        async with http.post(
            f"{s.url}/api/check",
            json={
                "snippets": [{"id": "a", "code": "theorem t : 1 + 1 = 2 := by rfl"}],
                "timeout": 30,
            },
        ) as answer:
            result = (await answer.json())["results"][0]
    assert document["openapi"] == "3.1.0"
    assert _spec_routes(document) == _routes_of(s.gateway.app)
    assert "/api/check" in page and "<script" in page
    assert not re.search(r"""(src|href)=["']https?://""", page), (
        "the page must not need the network"
    )
    assert result[kimina.EXTENSION_KEY]["status"] == "VALID"


# A DOM just large enough for the page's script: elements record what the
# script sets, and the script's visible text is printed as JSON.
_DOM_SHIM = """
const made = [];
class Element {
  constructor(tag) { this.tag = tag; this.kids = []; made.push(this); }
  append(...kids) { this.kids.push(...kids); }
}
const scripts = JSON.parse(require("fs").readFileSync(0, "utf8"));
globalThis.document = {
  createElement: tag => new Element(tag),
  getElementById: id => id in scripts ? {textContent: scripts[id]} : new Element("div"),
};
eval(scripts.main);
const shown = made.filter(e => !["pre", "textarea"].includes(e.tag)).flatMap(e => [
  ...(e.innerHTML !== undefined ? [{tag: e.tag, html: e.innerHTML}] : []),
  ...(e.textContent !== undefined ? [{tag: e.tag, text: e.textContent}] : []),
  ...e.kids.filter(k => typeof k === "string").map(k => ({tag: e.tag, text: k})),
]);
console.log(JSON.stringify(shown));
"""


async def test_docs_render_markdown_code_spans_not_raw_backticks(served, tmp_path):
    """The spec's texts say `detail`, `ReplResponse`...: /docs shows code, not backticks."""
    import shutil
    import subprocess

    s = await served(workers=1)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{s.url}/docs") as answer:
            page = await answer.text()
    # Server-side text: the description under the title.
    [intro] = re.findall(r"</h1><p>(.*?)</p>", page)
    assert "`" not in intro and "<code>Authorization: Bearer TOKEN</code>" in intro
    # Client-side text: run the page's own script in Node on a minimal DOM.
    node = shutil.which("node")
    assert node, "node is needed to run the page's script (the Node client's tests need it too)"
    scripts = dict(
        re.findall(r'<script id="(\w+)" type="application/json">(.*?)</script>', page, re.S)
    )
    scripts = {k: v.replace("<\\/", "</") for k, v in scripts.items()}
    scripts["main"] = re.findall(r"<script>(.*?)</script>", page, re.S)[-1]
    shim = tmp_path / "shim.js"
    shim.write_text(_DOM_SHIM)
    done = subprocess.run(
        [node, str(shim)], input=json.dumps(scripts), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    texts = [entry.get("html", entry.get("text", "")) for entry in shown]
    assert not [t for t in texts if "`" in t], [t for t in texts if "`" in t]
    html_parts = [entry["html"] for entry in shown if "html" in entry]
    assert any("<code>ReplResponse</code>" in h for h in html_parts), html_parts
    assert any("<code>codes</code>" in h for h in html_parts), html_parts
    # What is shown as HTML is escaped text plus <code>, nothing else.
    for part in html_parts:
        assert re.sub(r"</?code>", "", part).count("<") == 0, part


def test_inline_markdown_escapes_before_it_marks_code():
    assert (
        openapi.inline_markdown("a `<b>` & `c`") == "a <code>&lt;b&gt;</code> &amp; <code>c</code>"
    )
