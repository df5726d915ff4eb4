"""Drives the official, unmodified `kimina_client` against a server; run by the
peers' Python (>= 3.12, benchmarks/.peers-venv), never imported by pytest.

    python kimina_driver.py URL ACTION [ARGS_JSON]

Prints one JSON object on its last stdout line. Actions:
  selftest              sync and async `test()` and `health()`
  check   {path, ...}   `check()` over snippets in a JSON file (sync and async clients)
  bench   {dataset, n}  `run_benchmark()` on a local Hugging Face dataset folder
  raw     {path, body}  one POST with httpx, status and JSON body (for error shapes)
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys

import httpx
from kimina_client import AsyncKiminaClient, KiminaClient, Snippet


def analyzed(response) -> list[dict]:
    return [
        {"id": r.id, "status": r.analyze().status.value, "result": r.model_dump(exclude_none=True)}
        for r in response.results
    ]


def selftest(url: str, key: str | None) -> dict:
    sync = KiminaClient(api_url=url, api_key=key, n_retries=1)
    sync.test()
    health = sync.health()
    asyncio.run(AsyncKiminaClient(api_url=url, api_key=key, n_retries=1).test())
    return {"sync_test": "passed", "async_test": "passed", "health": health}


def check(url: str, key: str | None, args: dict) -> dict:
    with open(args["path"], encoding="utf-8") as f:
        snippets = [Snippet(id=s["id"], code=s["code"]) for s in json.load(f)]
    options = dict(
        timeout=args.get("timeout", 60),
        batch_size=args.get("batch_size", 8),
        max_workers=args.get("max_workers", 5),
        show_progress=False,
    )
    sync = KiminaClient(api_url=url, api_key=key, n_retries=1).check(snippets, **options)
    out = {"sync": analyzed(sync)}
    if args.get("async", True):
        client = AsyncKiminaClient(api_url=url, api_key=key, n_retries=1)
        out["async"] = analyzed(asyncio.run(client.check(snippets, **options)))
    return out


def bench(url: str, key: str | None, args: dict) -> dict:
    client = KiminaClient(api_url=url, api_key=key, n_retries=1)
    seen = []
    check_method = client.check

    def recording_check(*a, **kw):  # records what run_benchmark got; the client itself is untouched
        response = check_method(*a, **kw)
        seen.append(response)
        return response

    client.check = recording_check
    client.run_benchmark(
        dataset_name=args["dataset"],
        n=args["n"],
        batch_size=args.get("batch_size", 4),
        max_workers=args.get("max_workers", 2),
        timeout=30,
        show_progress=False,
    )
    return {"runs": len(seen), "results": analyzed(seen[0]) if seen else []}


def raw(url: str, key: str | None, args: dict) -> dict:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    headers.update(args.get("headers", {}))
    content = args["body"] if isinstance(args["body"], str) else json.dumps(args["body"])
    response = httpx.post(
        url + args["path"], content=content, headers={"Content-Type": "application/json", **headers}
    )
    return {"status": response.status_code, "json": response.json()}


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    url, action = sys.argv[1], sys.argv[2]
    args = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    key = args.get("key")
    if action == "selftest":
        out = selftest(url, key)
    elif action == "check":
        out = check(url, key, args)
    elif action == "bench":
        out = bench(url, key, args)
    elif action == "raw":
        out = raw(url, key, args)
    else:
        raise SystemExit(f"unknown action {action}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
