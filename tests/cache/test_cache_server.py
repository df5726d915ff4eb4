"""The cache in a real server: hits, bypass, options, statuses never cached,
a restart with cache_dir. Stand-in workers; results over gRPC."""

from __future__ import annotations

import grpc

from cache_support import cached_server, theorem
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc


async def raw_verify(app, code: str, **options) -> pb.Result:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        stub = pb_grpc.VerifierStub(channel)
        response = await stub.Verify(
            pb.VerifyRequest(
                snippets=[pb.Snippet(id="raw", code=code)], options=pb.VerifyOptions(**options)
            )
        )
    return response.results[0]


async def test_a_repeat_is_answered_from_memory_under_its_own_id():
    async with cached_server() as (app, client):
        code = theorem(1, "exact Nat.nonexistent_lemma x")
        [first] = await client.verify([("a", code)])
        [second] = await client.verify([("b", code)])
        assert first.status == second.status == "INVALID"
        assert first.cache_source == "" and first.original_run
        assert (second.id, second.cache_source, second.original_run) == (
            "b",
            "memory",
            first.original_run,
        )
        assert second.messages == first.messages and second.verifier == "stand-in"
        assert app.pool.stats.jobs_finished == 1


async def test_the_cache_option_bypasses_it():
    async with cached_server() as (app, _client):
        code = theorem(2)
        first = await raw_verify(app, code)
        bypassed = await raw_verify(app, code, cache=False)
        hit = await raw_verify(app, code)
        assert first.status == bypassed.status == hit.status == pb.STATUS_VALID
        assert bypassed.reuse.cache_source == "" and bypassed.reuse.original_run == ""
        assert hit.reuse.cache_source == "memory"
        assert app.pool.stats.jobs_finished == 2


async def test_a_different_option_or_body_is_a_miss():
    async with cached_server() as (app, _client):
        code = theorem(3)
        await raw_verify(app, code)
        with_tree = await raw_verify(app, code, infotree=pb.INFOTREE_MODE_FULL)
        # check_axioms is on by default (issue 25 item 3): off is the other option.
        with_axioms = await raw_verify(app, code, check_axioms=False)
        other_body = await raw_verify(app, code.replace("rfl", "simp"))
        for result in (with_tree, with_axioms, other_body):
            assert result.reuse.cache_source == ""
        assert with_tree.infotree_json  # the answer a hit would have lacked
        assert app.pool.stats.jobs_finished == 4
        assert (
            await raw_verify(app, code, infotree=pb.INFOTREE_MODE_FULL)
        ).infotree_json == with_tree.infotree_json


async def test_non_deterministic_statuses_are_never_cached():
    async with cached_server() as (app, client):
        slow = theorem(4) + "--@standin: burn=5\n"
        crash = theorem(5) + "--@standin: crash=kill\n"
        for _ in range(2):
            [timed_out] = await client.verify([("t", slow)], timeout_s=0.3)
            [crashed] = await client.verify([("c", crash)])
            assert timed_out.status == "TIMEOUT" and timed_out.cache_source == ""
            assert crashed.status == "CRASH" and crashed.cache_source == ""
        assert app.verify.cache.stats.stored == 0
        assert app.verify.cache.stats.not_cacheable == 4
        assert len(app.verify.cache.memory) == 0


async def test_a_verdict_slower_than_the_callers_timeout_is_not_served():
    async with cached_server() as (app, client):
        code = theorem(6) + "--@standin: burn=0.6\n"
        [first] = await client.verify([("a", code)], timeout_s=20)
        assert first.status == "VALID" and first.time_body_s >= 0.5
        [short] = await client.verify([("b", code)], timeout_s=0.2)
        assert short.status == "TIMEOUT"  # what it would have got without a cache
        [again] = await client.verify([("c", code)], timeout_s=20)
        assert again.cache_source == "memory"


async def test_a_bad_header_rejection_is_cached():
    async with cached_server() as (app, client):
        code = theorem(7, header="import Nonexistent.Module")
        [first] = await client.verify([("a", code)])
        [second] = await client.verify([("b", code)])
        assert first.status == second.status == "REJECTED"
        assert second.cache_source == "memory" and second.error == first.error


async def test_results_survive_a_restart_with_cache_dir(tmp_path):
    code = theorem(8, "sorry")
    async with cached_server(cache_dir=str(tmp_path)) as (_app, client):
        [first] = await client.verify([("a", code)])
    async with cached_server(cache_dir=str(tmp_path)) as (app, client):
        [second] = await client.verify([("b", code)])
        [third] = await client.verify([("c", code)])
        assert first.status == second.status == "SORRY"
        assert (second.cache_source, second.original_run) == ("disk", first.original_run)
        assert third.cache_source == "memory"
        assert app.pool.stats.jobs_finished == 0


async def test_the_cache_is_on_by_default_and_the_clients_cache_false_bypasses_it():
    from leanrpc.config import Config

    assert Config().cache.enabled and Config().cache.memory_mb > 0
    async with cached_server() as (app, client):
        code = theorem(9)
        [first] = await client.verify([("a", code)])
        [bypassed] = await client.verify_batch([("b", code)], cache=False)
        [streamed] = await client.verify([("c", code)], cache=False)
        [hit] = await client.verify([("d", code)])
        assert first.status == bypassed.status == streamed.status == hit.status == "VALID"
        assert bypassed.cache_source == streamed.cache_source == "" and hit.cache_source == "memory"
        assert app.pool.stats.jobs_finished == 3
