"""The REST gateway's OpenAPI 3.1 description (`GET /openapi.json`) and a
self-contained `GET /docs` page that renders it.

Owns: `OPERATIONS` (path, method, summary, request model, answers: the one
table the spec is built from; tests/gateway/test_openapi.py holds it equal to
the routes `server.build_app` registers), `spec()` and `docs_page()`. The
request schemas come from the same msgspec models that decode the bodies
(`kimina.CheckRequest`, `kimina.VerifyRequestBody`), so the spec cannot drift
from what is accepted. No CDN is reachable offline and no installed package
ships a viewer (swagger-ui, redoc), so /docs is one small HTML page with its
own script: each operation, its schema, and a form that sends a request.
The spec's texts are Markdown (`code` spans, as Swagger UI reads them); the
page shows them as HTML, rendered here (`inline_markdown`).
May import: gateway.kimina, msgspec, aiohttp.
"""

from __future__ import annotations

import html
import json
import re

import msgspec
from aiohttp import web

from .. import __version__
from . import kimina, reward

_DETAIL = {
    "description": "FastAPI's error shape: `detail` is a message or a list of `{type, loc, msg}`",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Detail"}}},
}
_RESULTS = {
    "description": "One result per snippet, in order (Kimina's `ReplResponse`: exactly one of "
    "`response` and `error`; leanrpc's verdict under `leanrpc`)",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Results"}}},
}
_HEALTH = {
    "description": "",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}},
}
_BATCH_ANSWERS = {
    "200": _RESULTS,
    "401": {**_DETAIL, "description": "Missing or invalid API key (when the server has tokens)"},
    "422": {**_DETAIL, "description": "The body does not match the schema (the location is named)"},
    "429": {**_DETAIL, "description": "Queue full or per-client limit; see Retry-After"},
    "503": {
        **_DETAIL,
        "description": "Not serving (no REPL worker can start); the reason is in detail",
    },
}
_NOT_IMPLEMENTED = {
    "501": {**_DETAIL, "description": "Not implemented by leanrpc; detail says what to use instead"}
}

# (path, method, summary, request model or None, answers). Trailing-slash twins
# (`/api/check/`, `/health/`) are the same operation and listed too.
OPERATIONS: list[tuple[str, str, str, type | None, dict]] = [
    (
        "/api/check",
        "post",
        "Check Lean snippets (kimina-ast-server 2.1.3, kimina_client.check)",
        kimina.CheckRequest,
        _BATCH_ANSWERS,
    ),
    ("/api/check/", "post", "Same as /api/check", kimina.CheckRequest, _BATCH_ANSWERS),
    (
        "/verify",
        "post",
        "Older Kimina API: verify `codes` (custom_id, proof or code)",
        kimina.VerifyRequestBody,
        _BATCH_ANSWERS,
    ),
    ("/one_pass_verify_batch", "post", "Same as /verify", kimina.VerifyRequestBody, _BATCH_ANSWERS),
    (
        "/health",
        "get",
        "Serving status: 200 once a REPL worker is up, 503 with the reason otherwise",
        None,
        {
            "200": {**_HEALTH, "description": "Serving"},
            "503": {**_HEALTH, "description": "Not serving: detail says why"},
        },
    ),
    (
        "/health/",
        "get",
        "Same as /health",
        None,
        {
            "200": {**_HEALTH, "description": "Serving"},
            "503": {**_HEALTH, "description": "Not serving"},
        },
    ),
    (
        "/",
        "get",
        "Same as /health",
        None,
        {
            "200": {**_HEALTH, "description": "Serving"},
            "503": {**_HEALTH, "description": "Not serving"},
        },
    ),
    *(
        (path, method, f"Kimina's {path}: answered 501 (see detail)", None, _NOT_IMPLEMENTED)
        for path in ("/api/ast", "/api/ast_code")
        for method in ("post", "get")
    ),
    (
        reward.PATH,
        "post",
        "OpenRLHF's remote reward (--remote_rm_url): one reward per query, the Lean code "
        "extracted from the response and pinned to its label (docs/REWARDS.md)",
        reward.RewardRequest,
        {
            "200": {
                "description": "`rewards` (= `scores`), 1.0 or 0.0 per query; `extra_logs` "
                "numbers per query; `details` the per-query verdicts",
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/Rewards"}}
                },
            },
            "401": _BATCH_ANSWERS["401"],
            "422": _BATCH_ANSWERS["422"],
            "429": _BATCH_ANSWERS["429"],
            "503": {
                **_DETAIL,
                "description": "An infrastructure failure (no reward, never 0), or not serving; "
                "`details` holds the per-query verdicts",
            },
        },
    ),
    (
        "/openapi.json",
        "get",
        "This description",
        None,
        {"200": {"description": "OpenAPI 3.1 document"}},
    ),
    (
        "/api/openapi.json",
        "get",
        "Same as /openapi.json (where Kimina's server has it)",
        None,
        {"200": {"description": "OpenAPI 3.1 document"}},
    ),
    (
        "/docs",
        "get",
        "A page that renders this description and can send requests",
        None,
        {"200": {"description": "HTML"}},
    ),
]

_EXTRA_SCHEMAS = {
    "Detail": {"type": "object", "properties": {"detail": {}}, "required": ["detail"]},
    "Results": {
        "type": "object",
        "required": ["results"],
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id"],
                    "properties": {
                        "id": {"type": "string"},
                        "time": {"type": "number"},
                        "response": {
                            "type": "object",
                            "description": "the REPL's answer: messages, sorries, infotree",
                        },
                        "error": {
                            "type": "string",
                            "description": "a server-side failure (timeout, crash, refusal)",
                        },
                        kimina.EXTENSION_KEY: {
                            "type": "object",
                            "description": "leanrpc's verdict (status: VALID, INVALID, "
                            "SORRY, TIMEOUT, CRASH, OUT_OF_MEMORY, REJECTED, CANCELLED), timings, verifier",
                        },
                    },
                },
            }
        },
    },
    "Rewards": {
        "type": "object",
        "required": ["rewards", "scores", "extra_logs"],
        "properties": {
            "rewards": {"type": "array", "items": {"type": "number"}},
            "scores": {"type": "array", "items": {"type": "number"}},
            "extra_logs": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "number"}},
            },
            "details": {"type": "array", "items": {"type": "object"}},
        },
    },
    "Health": {
        "type": "object",
        "required": ["status"],
        "properties": {
            "status": {"enum": ["ok", "unavailable"]},
            "detail": {"type": "string"},
            kimina.EXTENSION_KEY: {"type": "object"},
        },
    },
}


def spec() -> dict:
    """The OpenAPI 3.1 document of the gateway."""
    models = sorted(
        {model for *_rest, model, _answers in OPERATIONS if model is not None},
        key=lambda m: m.__name__,
    )
    _refs, components = msgspec.json.schema_components(
        models, ref_template="#/components/schemas/{name}"
    )
    paths: dict[str, dict] = {}
    for path, method, summary, model, answers in OPERATIONS:
        operation: dict = {"summary": summary, "responses": answers}
        if model is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {"$ref": f"#/components/schemas/{model.__name__}"}
                    }
                },
            }
            operation["security"] = [{}, {"bearer": []}]
        paths.setdefault(path, {})[method] = operation
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "leanrpc REST gateway (Kimina-compatible)",
            "version": __version__,
            "description": "The same verifier as leanrpc's gRPC API (docs/CLIENTS.md). Bearer tokens are "
            "checked when the server has them (`Authorization: Bearer TOKEN`).",
        },
        "paths": paths,
        "components": {
            "schemas": {**components, **_EXTRA_SCHEMAS},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body{{font:15px/1.45 system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}}
h1{{font-size:1.4em}} .op{{border:1px solid #ccc;border-radius:6px;margin:.8em 0;padding:.4em .8em}}
.m{{display:inline-block;min-width:4em;font-weight:bold;text-transform:uppercase}} .post{{color:#0a6}} .get{{color:#06c}}
code,pre,textarea{{font:13px ui-monospace,monospace}} pre{{background:#f6f6f6;padding:.5em;overflow:auto}}
textarea{{width:100%;height:9em}} summary{{cursor:pointer}}
</style></head><body>
<h1>{title}</h1><p>{description}</p><p><a href="openapi.json">openapi.json</a></p>
<div id="ops"></div>
<script id="spec" type="application/json">{spec}</script>
<script id="rendered" type="application/json">{rendered}</script>
<script>
const spec = JSON.parse(document.getElementById("spec").textContent);
const rendered = JSON.parse(document.getElementById("rendered").textContent);
const el = (tag, attrs, ...kids) => {{ const e = document.createElement(tag);
  Object.assign(e, attrs || {{}}); kids.forEach(k => e.append(k)); return e; }};
const resolve = s => s && s.$ref ? spec.components.schemas[s.$ref.split("/").pop()] : s;
const example = {{"CheckRequest": {{"snippets": [{{"id": "a", "code": "theorem t : 1 + 1 = 2 := by rfl"}}], "timeout": 30}},
  "VerifyRequestBody": {{"codes": [{{"custom_id": "a", "proof": "theorem t : 1 + 1 = 2 := by rfl"}}]}}}};
for (const [path, methods] of Object.entries(spec.paths)) for (const [method, op] of Object.entries(methods)) {{
  const box = el("details", {{className: "op"}},
    el("summary", {{}}, el("span", {{className: "m " + method, textContent: method}}), el("code", {{textContent: path}}),
       " \u2014 ", el("span", {{innerHTML: rendered[path][method].summary}})));
  box.append(el("ul", {{}}, ...rendered[path][method].answers.map(a => el("li", {{innerHTML: a}}))));
  if (op.requestBody) {{
    const ref = op.requestBody.content["application/json"].schema.$ref.split("/").pop();
    box.append(el("p", {{textContent: "Request body: " + ref}}),
               el("pre", {{textContent: JSON.stringify(resolve({{$ref: "#/components/schemas/" + ref}}), null, 1)}}));
    const body = el("textarea", {{value: JSON.stringify(example[ref], null, 1)}});
    const token = el("input", {{placeholder: "bearer token (if the server has tokens)", size: 40}});
    const out = el("pre", {{}});
    const send = el("button", {{textContent: "Send", onclick: async () => {{
      const headers = {{"Content-Type": "application/json"}};
      if (token.value) headers.Authorization = "Bearer " + token.value;
      const r = await fetch(path, {{method: "POST", headers, body: body.value}});
      out.textContent = r.status + "\\n" + JSON.stringify(await r.json(), null, 1); }}}});
    box.append(body, token, " ", send, out);
  }}
  document.getElementById("ops").append(box);
}}
</script></body></html>
"""


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def inline_markdown(text: str) -> str:
    """HTML for one line of the spec's text: escaped, its `code spans` as
    <code>. Only code spans occur in these texts, so a rule of our own rather
    than a Markdown library (none is a dependency; one would also pass raw
    HTML through)."""
    return _CODE_SPAN.sub(r"<code>\1</code>", html.escape(text, quote=False))


def _rendered(document: dict) -> dict:
    """Each operation's summary and answers as HTML, for the page's script."""
    return {
        path: {
            method: {
                "summary": inline_markdown(op["summary"]),
                "answers": [
                    inline_markdown(f"{code}: {answer['description']}")
                    for code, answer in op["responses"].items()
                ],
            }
            for method, op in methods.items()
        }
        for path, methods in document["paths"].items()
    }


def _embed(value) -> str:
    # "</" inside the embedded JSON would end the <script>: escape it.
    return json.dumps(value).replace("</", "<\\/")


def docs_page() -> str:
    document = spec()
    info = document["info"]
    return _PAGE.format(
        title=html.escape(info["title"]),
        description=inline_markdown(info["description"]),
        spec=_embed(document),
        rendered=_embed(_rendered(document)),
    )


def routes() -> list[web.RouteDef]:
    """GET /openapi.json (also /api/openapi.json) and GET /docs (open, like FastAPI's: they say nothing about the data)."""
    document = json.dumps(spec()).encode()
    page = docs_page()

    async def openapi_json(_request: web.Request) -> web.Response:
        return web.Response(body=document, content_type="application/json")

    async def docs(_request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    return [
        web.get("/openapi.json", openapi_json),
        web.get("/api/openapi.json", openapi_json),
        web.get("/docs", docs),
    ]
