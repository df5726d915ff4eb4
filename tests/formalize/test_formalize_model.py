"""The model stack on a tiny random-init Qwen3-MoE: unfusing, NF4, adapters, the batched engine.

Random weights emit garbage, so these tests check mechanics, never Lean validity.
"""

import asyncio
import json

# The test command installs the model extra; a missing stack must fail, not skip.
import bitsandbytes  # noqa: E402,F401
import peft  # noqa: E402,F401
import pytest
import torch  # noqa: E402

from formalize_support import FakeVerify, collect  # noqa: E402
from leanrpc.formalize.config import FormalizeConfig  # noqa: E402
from leanrpc.formalize.engine import GenerationEngine, PromptTooLong  # noqa: E402
from leanrpc.formalize.generation import SamplingParams  # noqa: E402
from leanrpc.formalize.loading import (  # noqa: E402
    ModelLoadError,
    attach_adapters,
    count_quantized,
    expert_adapter_modules,
    load,
    load_base_model,
    load_tokenizer,
)
from leanrpc.formalize.modeling import (  # noqa: E402
    UNFUSED_MODEL_TYPE,
    Qwen3MoeUnfusedExperts,
    Qwen3MoeUnfusedForCausalLM,
    copy_fused_experts,
)
from leanrpc.formalize.tiny import TinySpec  # noqa: E402
from leanrpc.formalize.types import (
    Candidate,
    FormalizeRequest,
    Outcome,
    OutcomeStatus,
    Sampling,
    TokenChunk,
)  # noqa: E402
from leanrpc.services.formalize import FormalizeService  # noqa: E402

pytestmark = pytest.mark.model

SPEC = TinySpec()
N_EXPERT_LINEARS = SPEC.num_hidden_layers * SPEC.num_experts * 3
N_QUANTIZED = SPEC.num_hidden_layers * (4 + SPEC.num_experts * 3)
EXPERT_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@pytest.fixture(scope="module")
def tokenizer(tiny_dir):
    return load_tokenizer(str(tiny_dir))


@pytest.fixture(scope="module")
def fp32_model(tiny_dir):
    model, _ = load_base_model(str(tiny_dir), device="cpu", quantize=False)
    return model


@pytest.fixture(scope="module")
def engine(fp32_model, tokenizer):
    eng = GenerationEngine(fp32_model, tokenizer, max_batch=4, max_prompt_tokens=512)
    yield eng
    eng.close()


def ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


# --------------------------------------------------------------------------- modeling


def test_checkpoint_is_hub_layout(tiny_dir):
    from safetensors import safe_open

    with safe_open(str(tiny_dir / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert "model.layers.0.mlp.experts.0.gate_proj.weight" in keys
    assert f"model.layers.1.mlp.experts.{SPEC.num_experts - 1}.down_proj.weight" in keys
    assert not any("gate_up_proj" in k for k in keys)
    assert json.loads((tiny_dir / "config.json").read_text())["model_type"] == "qwen3_moe"


def test_unfused_matches_fused(tiny_dir, fp32_model):
    from transformers import Qwen3MoeForCausalLM

    fused = Qwen3MoeForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32)
    assert fused.model.layers[0].mlp.experts.gate_up_proj.ndim == 3
    experts = fp32_model.model.layers[0].mlp.experts
    assert isinstance(experts, Qwen3MoeUnfusedExperts) and len(experts) == SPEC.num_experts
    assert isinstance(experts[3].up_proj, torch.nn.Linear)
    assert fp32_model.config.model_type == UNFUSED_MODEL_TYPE
    assert not any("gate_up_proj" in n for n, _ in fp32_model.named_parameters())
    torch.manual_seed(1)
    x = torch.randint(0, 151_000, (3, 21))
    with torch.no_grad():
        a = fused(x).logits
        b = fp32_model(x).logits
    assert (a - b).abs().max().item() < 1e-5
    # the routing used several experts (the comparison is not vacuous)
    with torch.no_grad():
        h = fused.model.embed_tokens(x).view(-1, SPEC.hidden_size)
        _, _, idx = fused.model.layers[0].mlp.gate(h)
    assert len(set(idx.flatten().tolist())) >= SPEC.num_experts // 2
    # copy_fused_experts reproduces the same weights from a fused model
    fresh = Qwen3MoeUnfusedForCausalLM(fused.config)
    copy_fused_experts(fused, fresh)
    with torch.no_grad():
        assert (fresh(x).logits - a).abs().max().item() < 1e-5


def test_nf4_double_quant_load(tiny_dir, fp32_model):
    import bitsandbytes as bnb

    model, dev = load_base_model(str(tiny_dir), device="cpu", quantize=True)
    assert dev.type == "cpu"
    assert count_quantized(model) == N_QUANTIZED
    plain = [
        n
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and not isinstance(m, bnb.nn.Linear4bit)
    ]
    assert plain == ["lm_head"]
    w = model.model.layers[1].mlp.experts[5].down_proj.weight
    assert isinstance(w, bnb.nn.Params4bit) and w.quant_type == "nf4" and w.compress_statistics
    assert (
        w.quant_state.nested
    )  # double quantization (checked before the first CPU forward repacks it)
    assert model.model.layers[0].mlp.gate.weight.dtype == torch.bfloat16  # router stays unquantized
    x = torch.randint(0, 151_000, (2, 13))
    with torch.no_grad():
        q = model(x).logits.float()
        ref = fp32_model(x).logits
    cos = torch.nn.functional.cosine_similarity(q.flatten(), ref.flatten(), dim=0).item()
    assert cos > 0.95, cos


# --------------------------------------------------------------------------- adapters


def _make_adapter(tiny_dir, out_dir, *, use_dora: bool, seed: int):
    from peft import LoraConfig, get_peft_model

    base, _ = load_base_model(str(tiny_dir), device="cpu", quantize=True)
    peft_model = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=EXPERT_TARGETS, use_dora=use_dora)
    )
    torch.manual_seed(seed)
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)  # B starts at zero; make the adapter do something
    peft_model.save_pretrained(str(out_dir))
    return out_dir


@pytest.fixture(scope="module")
def adapter_dirs(tiny_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("adapters")
    return [
        _make_adapter(tiny_dir, root / "dora", use_dora=True, seed=1),
        _make_adapter(tiny_dir, root / "lora", use_dora=False, seed=2),
    ]


def test_adapters_land_on_experts(tiny_dir, adapter_dirs, tokenizer):
    from peft.tuners.lora import LoraLayer

    cfg = FormalizeConfig(
        model_dir=str(tiny_dir), adapter_dirs=[str(d) for d in adapter_dirs], device="cpu"
    )
    loaded = load(cfg)
    model = loaded.model
    assert loaded.adapters == ["dora", "lora"]  # named after their directories
    assert loaded.default_adapter == "dora"  # default_adapter "auto": the first one
    assert len(expert_adapter_modules(model, "dora")) == N_EXPERT_LINEARS
    assert len(expert_adapter_modules(model, "lora")) == N_EXPERT_LINEARS
    layer = model.get_base_model().model.layers[0].mlp.experts[2].gate_proj
    assert isinstance(layer, LoraLayer) and set(layer.active_adapters) == {"dora"}
    assert "dora" in layer.lora_magnitude_vector  # DoRA
    assert loaded.info["expert_adapter_modules"] == N_EXPERT_LINEARS
    assert len(_trained_expert_weights(model)) >= N_EXPERT_LINEARS  # the saved weights landed
    base, _ = load_base_model(str(tiny_dir), device="cpu", quantize=True)
    x = torch.randint(0, 151_000, (1, 11))
    with torch.no_grad():
        diff = (model(input_ids=x).logits.float() - base(x).logits.float()).abs().max().item()
    assert diff > 1e-2  # the adapters change the output
    # the engine runs the adapted model (it unwraps the PeftModel, adapters stay injected)
    eng = GenerationEngine(model, tokenizer, max_batch=2, adapter_names=loaded.adapters)
    try:
        res = eng.submit(
            ids(tokenizer, "theorem"), SamplingParams(max_new_tokens=3, adapter="lora")
        ).wait(60)
        assert res.generated_tokens == 3 or res.finish_reason == "eos"
    finally:
        eng.close()


def test_peft_trap_without_mark_unfused(tiny_dir, adapter_dirs):
    """With model_type qwen3_moe, PEFT rewrites expert targets to fused names and drops them."""
    from peft import PeftModel

    base, _ = load_base_model(str(tiny_dir), device="cpu", quantize=True)
    base.config.model_type = "qwen3_moe"
    with pytest.raises(ModelLoadError, match="mark_unfused"):
        attach_adapters(base, [str(adapter_dirs[1])])
    # PEFT's only signal is a warning, worded by its version: up to 0.21 a RuntimeWarning that
    # the fused target parameters matched nothing; from 0.22 a UserWarning naming the expert
    # adapter keys it did not load.
    with pytest.warns(Warning, match="no parameter was matched|Found missing adapter keys"):
        trapped = PeftModel.from_pretrained(base, str(adapter_dirs[1]))
    # The silent failure our check catches: no expert carries the trained weights. Up to PEFT
    # 0.21 the expert projections get no adapter at all; from 0.22 they get one, freshly made.
    assert _trained_expert_weights(trapped) == []


def _trained_expert_weights(model) -> list[str]:
    """Expert adapter B matrices that are not PEFT's zero init (the adapters above set them)."""
    return [
        name
        for name, param in model.named_parameters()
        if ".mlp.experts." in name and "lora_B" in name and param.abs().max().item() > 0
    ]


def test_loader_errors(tiny_dir, tmp_path):
    with pytest.raises(ModelLoadError, match="unset"):
        load(FormalizeConfig(model_dir=None))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ModelLoadError, match="llama"):
        load(FormalizeConfig(model_dir=str(bad), device="cpu"))
    with pytest.raises(ModelLoadError, match="adapter_config.json"):
        load(
            FormalizeConfig(
                model_dir=str(tiny_dir),
                device="cpu",
                quantize=False,
                adapter_dirs=[str(tmp_path / "nope")],
            )
        )
    if not torch.cuda.is_available():
        with pytest.raises(ModelLoadError, match="CUDA is not available"):
            load(FormalizeConfig(model_dir=str(tiny_dir), device="cuda"))


# --------------------------------------------------------------------------- engine

PROMPTS = ["theorem foo : 1 + 1 = 2 := by", "Prove that there are infinitely many primes.", "x"]


def test_batched_equals_sequential(engine, tokenizer):
    params = SamplingParams(max_new_tokens=12)
    alone = [engine.submit(ids(tokenizer, p), params).wait(60) for p in PROMPTS]
    before = engine.stats.max_batch_seen
    together = [s.wait(60) for s in [engine.submit(ids(tokenizer, p), params) for p in PROMPTS]]
    for a, b in zip(alone, together):
        assert a.token_ids == b.token_ids and a.text == b.text
        assert a.finish_reason in ("length", "eos")
    assert engine.stats.max_batch_seen >= 2 or before >= 2
    assert together[0].prompt_tokens == len(ids(tokenizer, PROMPTS[0]))


async def test_late_joiner_and_streaming(engine, tokenizer):
    long_ref = engine.submit(ids(tokenizer, PROMPTS[1]), SamplingParams(max_new_tokens=40)).wait(60)
    short_ref = engine.submit(ids(tokenizer, PROMPTS[2]), SamplingParams(max_new_tokens=6)).wait(60)
    long_stream = engine.submit(ids(tokenizer, PROMPTS[1]), SamplingParams(max_new_tokens=40))
    deltas = []
    short_stream = None
    async for d in long_stream:
        deltas.append(d)
        if len(deltas) == 5 and short_stream is None:
            short_stream = engine.submit(
                ids(tokenizer, PROMPTS[2]), SamplingParams(max_new_tokens=6)
            )
    long_res = await long_stream.result()
    short_res = await short_stream.result()
    assert "".join(deltas) == long_res.text
    assert long_res.token_ids == long_ref.token_ids  # joining mid-way changed nothing
    assert short_res.token_ids == short_ref.token_ids
    assert long_res.ttft_s > 0 and long_res.generation_s > 0


async def test_cancel_stops_within_a_few_tokens(engine, tokenizer):
    stream = engine.submit(ids(tokenizer, PROMPTS[0]), SamplingParams(max_new_tokens=400))
    other = engine.submit(ids(tokenizer, PROMPTS[1]), SamplingParams(max_new_tokens=20))
    n = 0
    async for _ in stream:
        n += 1
        if n == 3:
            stream.cancel()
    res = await stream.result()
    assert res.finish_reason == "cancelled"
    assert res.generated_tokens <= n + 3
    assert (await other.result()).finish_reason in ("length", "eos")  # the batch-mate is unaffected


def test_sampling_seeded_and_stop_strings(engine, tokenizer):
    p = SamplingParams(
        temperature=1.0, top_p=0.9, top_k=50, repetition_penalty=1.1, max_new_tokens=10, seed=7
    )
    a = engine.submit(ids(tokenizer, PROMPTS[0]), p).wait(60)
    b = engine.submit(ids(tokenizer, PROMPTS[0]), p).wait(60)
    assert a.token_ids == b.token_ids
    greedy = engine.submit(ids(tokenizer, PROMPTS[0]), SamplingParams(max_new_tokens=20)).wait(60)
    stop = greedy.text[5:8]
    assert stop.strip()
    cut = engine.submit(
        ids(tokenizer, PROMPTS[0]), SamplingParams(max_new_tokens=20, stop=(stop,))
    ).wait(60)
    assert cut.finish_reason == "stop" and cut.text == greedy.text[: greedy.text.index(stop)]


def test_submit_validation(engine, tokenizer):
    with pytest.raises(PromptTooLong):
        engine.submit(list(range(1, 600)))
    with pytest.raises(ValueError):
        engine.submit([])
    text = engine.encode_chat([{"role": "user", "content": "hi"}], "```lean\n")
    assert tokenizer.decode(text).endswith("<|im_start|>assistant\n```lean\n")


# --------------------------------------------------------------------------- service on the tiny model


async def test_service_end_to_end_nf4(tiny_dir):
    cfg = FormalizeConfig(
        model_dir=str(tiny_dir),
        device="cpu",
        quantize=True,
        max_batch=4,
        max_new_tokens=8,
        mathlib_names_path=None,
    )
    verify = FakeVerify()
    svc = FormalizeService.start_loading(cfg, verify)
    assert await svc.wait_loaded(120)
    assert svc.serving_status() == (True, ""), svc.serving_status()
    assert svc.model_info["linear4bit_modules"] == N_QUANTIZED
    session = svc.open_session()
    for i in range(3):
        session.submit(
            FormalizeRequest(
                id=f"j{i}",
                informal_statement="Two plus two is four.",
                max_iterations=2,
                stream_tokens=True,
                sampling=Sampling(temperature=0.8, seed=i + 1),
            )
        )
    session.end_input()
    events = await asyncio.wait_for(collect(session.events()), 120)
    outs = {e.job_id: e.payload for e in events if isinstance(e.payload, Outcome)}
    assert set(outs) == {"j0", "j1", "j2"}
    for out in outs.values():
        # garbage from a random model is never a theorem: two ill-formed candidates, no verify
        assert out.status == OutcomeStatus.EXHAUSTED and out.iterations == 2
        assert 0 < out.generated_tokens <= 16
    cands = [e.payload for e in events if isinstance(e.payload, Candidate)]
    assert len(cands) == 6 and all(not c.well_formed.ok for c in cands)
    assert any(isinstance(e.payload, TokenChunk) for e in events)
    assert verify.codes == []
    assert svc.info()["engine"]["max_batch_seen"] >= 2  # the three jobs were decoded together
    await svc.close()
    assert not svc.serving_status()[0]


# --------------------------------------------------------------------------- skeleton (full-size GPU check, small here)


def test_quantize_in_place_matches_loader(tiny_dir, fp32_model):
    from leanrpc.formalize.skeleton import quantize_linears_nf4

    loaded_nf4, _ = load_base_model(str(tiny_dir), device="cpu", quantize=True)
    manual, _ = load_base_model(str(tiny_dir), device="cpu", quantize=False)
    assert quantize_linears_nf4(manual, device="cpu") == N_QUANTIZED
    x = torch.randint(0, 151_000, (1, 9))
    with torch.no_grad():
        a = manual.to(torch.bfloat16)(x).logits.float()
        b = loaded_nf4(x).logits.float()
    assert (a - b).abs().max().item() < 0.05  # same quantizer; only bf16 rounding differs


def test_random_nf4_skeleton_without_bf16_copy(tokenizer):
    from leanrpc.formalize.skeleton import build_random_nf4, qwen3_coder_30b_a3b_config
    from leanrpc.formalize.tiny import tiny_config

    real = qwen3_coder_30b_a3b_config()
    assert (
        real.num_hidden_layers,
        real.num_experts,
        real.num_experts_per_tok,
        real.moe_intermediate_size,
    ) == (48, 128, 8, 768)
    model, n = build_random_nf4(tiny_config(), device="cpu")
    assert n == N_QUANTIZED and not any(p.is_meta for p in model.parameters())
    eng = GenerationEngine(model, tokenizer, max_batch=2)
    try:
        res = eng.submit(ids(tokenizer, "theorem"), SamplingParams(max_new_tokens=4)).wait(60)
    finally:
        eng.close()
    assert res.generated_tokens >= 1


def test_gpu_check_dry_run_on_cpu(tmp_path):
    """benchmarks/gpu_check.py runs end to end (CPU, small full-size stand-in)."""
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    out = tmp_path / "gpu_check.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(root / "benchmarks" / "gpu_check.py"),
            "--device",
            "cpu",
            "--skip-full",
            "--decode-tokens",
            "4",
            "--bench-layers",
            "2",
            "--bench-experts",
            "16",
            "--bench-steps",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    summary = json.loads(out.read_text())
    assert proc.returncode == 0, (proc.stderr[-3000:], summary)
    for name in (
        "env",
        "dispatch_bench",
        "tiny_checkpoint",
        "fused_vs_unfused",
        "nf4_load",
        "adapters",
        "engine_tiny",
        "hf_generate_tiny",
    ):
        assert summary["checks"][name]["ok"], (name, summary["checks"][name])
    assert summary["checks"]["full_size_nf4"] == {"skipped": "--skip-full"}


# --------------------------------------------------------------------------- gRPC on the tiny model


async def test_grpc_streams_batched_and_client_cancel(fp32_model, tokenizer):
    """Two client streams share the engine's batch; a client cancel stops its sequence within a few tokens."""
    import grpc

    from leanrpc.edge.formalizer import FormalizerServicer
    from leanrpc.v1 import formalizer_pb2 as pb
    from leanrpc.v1 import formalizer_pb2_grpc

    eng = GenerationEngine(fp32_model, tokenizer, max_batch=4)
    eng.eos_ids = set()  # random weights: never stop early
    streams = []
    submit = eng.submit_chat
    eng.submit_chat = lambda *a, **kw: streams.append(submit(*a, **kw)) or streams[-1]
    svc = FormalizeService(
        eng, FakeVerify(), FormalizeConfig(max_new_tokens=256, mathlib_names_path=None)
    )
    server = grpc.aio.server()
    formalizer_pb2_grpc.add_FormalizerServicer_to_server(FormalizerServicer(svc), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = formalizer_pb2_grpc.FormalizerStub(channel)

    def request(id_, n):
        return pb.FormalizeClientMessage(
            request=pb.FormalizeRequest(
                id=id_,
                informal_statement="Two plus two is four.",
                max_iterations=1,
                stream_tokens=True,
                sampling=pb.SamplingOptions(max_new_tokens=n),
            )
        )

    async def one_shot(id_, n):
        async def reqs():
            yield request(id_, n)

        return [ev async for ev in stub.Formalize(reqs())]

    async def cancelled_stream():
        async def reqs():
            yield request("long", 200)
            await asyncio.sleep(30)

        call = stub.Formalize(reqs())
        seen = 0
        async for ev in call:
            seen += ev.HasField("token")
            if seen == 3:
                call.cancel()
                break
        return seen

    try:
        short, seen = await asyncio.wait_for(
            asyncio.gather(one_shot("short", 24), cancelled_stream()), 120
        )
        assert (
            short[-1].outcome.status == pb.FORMALIZE_OUTCOME_STATUS_EXHAUSTED
            and short[-1].outcome.generated_tokens == 24
        )
        assert eng.stats.max_batch_seen >= 2  # the two streams were decoded together
        results = [await asyncio.wait_for(s.result(), 30) for s in streams]
        cancelled = [r for r in results if r.finish_reason == "cancelled"]
        assert len(cancelled) == 1 and cancelled[0].generated_tokens <= seen + 6, results
    finally:
        await channel.close()
        await server.stop(None)
        eng.close()


def test_engine_survives_a_failing_step(fp32_model, tokenizer):
    eng = GenerationEngine(fp32_model, tokenizer, max_batch=2)
    try:
        real = eng._merge
        calls = {"n": 0}

        def boom(*a):
            calls["n"] += 1
            if calls["n"] == 2:
                raise RuntimeError("CUDA out of memory (simulated)")
            return real(*a)

        eng._merge = boom
        s1 = eng.submit(ids(tokenizer, "a b c"), SamplingParams(max_new_tokens=50))
        s2 = eng.submit(ids(tokenizer, "d e f"), SamplingParams(max_new_tokens=50))
        r1, r2 = s1.wait(60), s2.wait(60)
        assert {r1.finish_reason, r2.finish_reason} <= {"error", "length"} and "error" in {
            r1.finish_reason,
            r2.finish_reason,
        }
        assert "simulated" in (r1.error + r2.error)
        ok = eng.submit(ids(tokenizer, "g"), SamplingParams(max_new_tokens=3)).wait(
            60
        )  # still serving
        assert ok.finish_reason == "length" and ok.generated_tokens == 3
    finally:
        eng.close()
