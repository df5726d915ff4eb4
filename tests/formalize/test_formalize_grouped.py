"""Strict loading, fused-layout conversion, grouped expert dispatch and adapters per request (tiny model)."""

import json
import shutil

import pytest
import torch

from formalize_support import FakeVerify
from leanrpc.formalize.adapters import UnknownAdapter, adapter_names_for, select_adapters
from leanrpc.formalize.checkpoint import expert_layout
from leanrpc.formalize.config import FormalizeConfig
from leanrpc.formalize.engine import GenerationEngine
from leanrpc.formalize.generation import SamplingParams
from leanrpc.formalize.grouped import ExpertBank, disable_grouped_dispatch, enable_grouped_dispatch
from leanrpc.formalize.loading import (
    ModelLoadError,
    attach_adapters,
    load,
    load_base_model,
    load_tokenizer,
)
from leanrpc.formalize.tiny import TinySpec
from leanrpc.services.formalize import FormalizeService

pytestmark = pytest.mark.model

SPEC = TinySpec()
TARGETS = ["q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _logits(model, x):
    with torch.no_grad():
        return model(x).logits.float()


def _close(a, b, quantize: bool) -> bool:
    """fp32: float tolerance. NF4 (bf16 compute, rounding differs by op order): max < 0.1 and
    mean < 0.01 on logits whose adapter effect is ~0.2 on average, cosine > 0.999."""
    d = (a - b).abs()
    if not quantize:
        return d.max().item() < 1e-5
    cos = torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0).item()
    return d.max().item() < 0.1 and d.mean().item() < 0.01 and cos > 0.999


@pytest.fixture(scope="module")
def fused_dir(tiny_dir, tmp_path_factory):
    """The tiny checkpoint rewritten in transformers 5's fused layout (experts.gate_up_proj)."""
    from safetensors.torch import save_file
    from transformers import Qwen3MoeForCausalLM

    fused = Qwen3MoeForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32)
    out = tmp_path_factory.mktemp("fused")
    for item in tiny_dir.iterdir():
        if item.suffix != ".safetensors":
            shutil.copy2(item, out / item.name)
    state = {k: v.contiguous() for k, v in fused.state_dict().items()}
    assert "model.layers.0.mlp.experts.gate_up_proj" in state
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


@pytest.fixture(scope="module")
def adapter_dirs(tiny_dir, tmp_path_factory):
    """A LoRA and a DoRA adapter on attention and every expert, with non-zero B."""
    from peft import LoraConfig, get_peft_model

    root = tmp_path_factory.mktemp("grouped-adapters")
    dirs = []
    for seed, (name, dora) in enumerate((("alpha", False), ("beta", True)), start=1):
        base, _ = load_base_model(str(tiny_dir), device="cpu", quantize=False)
        pm = get_peft_model(
            base, LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS, use_dora=dora)
        )
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for n, p in pm.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.2, generator=gen)
        pm.save_pretrained(str(root / name))
        dirs.append(root / name)
    return dirs


# ---------------------------------------------------------------- strict loading


def test_fused_checkpoint_is_converted_and_matches_the_fused_model(tiny_dir, fused_dir):
    from transformers import Qwen3MoeForCausalLM

    assert expert_layout(fused_dir) == "fused" and expert_layout(tiny_dir) == "per_expert"
    stock = Qwen3MoeForCausalLM.from_pretrained(str(fused_dir), dtype=torch.float32)
    converted, _ = load_base_model(str(fused_dir), device="cpu", quantize=False)
    x = torch.randint(0, 151_000, (2, 15), generator=torch.Generator().manual_seed(3))
    ref = _logits(stock, x)
    assert (_logits(converted, x) - ref).abs().max().item() < 1e-5
    # gate is the first half of gate_up_proj: swapping the halves changes the output
    experts = converted.model.layers[0].mlp.experts
    with torch.no_grad():
        for e in experts:
            g = e.gate_proj.weight.clone()
            e.gate_proj.weight.copy_(e.up_proj.weight)
            e.up_proj.weight.copy_(g)
    assert (_logits(converted, x) - ref).abs().max().item() > 1e-3


def test_partial_or_extra_weights_are_refused_naming_the_keys(tiny_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    bad = tmp_path / "partial"
    shutil.copytree(tiny_dir, bad)
    state = load_file(str(bad / "model.safetensors"))
    del state["model.layers.1.mlp.experts.3.up_proj.weight"]
    state["model.layers.0.mlp.shared_expert.weight"] = torch.zeros(4)
    save_file(state, str(bad / "model.safetensors"), metadata={"format": "pt"})
    for quantize in (False, True):
        with pytest.raises(ModelLoadError) as err:
            load_base_model(str(bad), device="cpu", quantize=quantize)
        assert "model.layers.1.mlp.experts.3.up_proj.weight" in str(err.value)
        assert "model.layers.0.mlp.shared_expert.weight" in str(err.value)
    service = FormalizeService.from_config(
        FormalizeConfig(model_dir=str(bad), device="cpu"), FakeVerify()
    )
    ok, reason = service.serving_status()
    assert not ok and "missing" in reason and "experts.3.up_proj" in reason


def test_adapter_names():
    assert adapter_names_for(["/a/dora", "x=/b/lora"]) == [("dora", "/a/dora"), ("x", "/b/lora")]
    with pytest.raises(ValueError, match="twice"):
        adapter_names_for(["/a/dora", "/b/dora"])


# ---------------------------------------------------------------- grouped dispatch


def test_bank_forward_never_syncs_with_the_host(tiny_dir, monkeypatch):
    model, _ = load_base_model(str(tiny_dir), device="cpu", quantize=True)
    enable_grouped_dispatch(model)
    bank = model.model.layers[0].mlp.experts.bank
    assert isinstance(bank, ExpertBank) and bank.quantized
    hidden = torch.randn(5, SPEC.hidden_size)
    idx = torch.randint(0, SPEC.num_experts, (5, SPEC.num_experts_per_tok))
    w = torch.rand(5, SPEC.num_experts_per_tok)

    def forbidden(*a, **k):
        raise AssertionError("host sync inside the grouped layer")

    for name in ("tolist", "item", "__bool__", "__int__", "nonzero"):
        monkeypatch.setattr(torch.Tensor, name, forbidden)
    with torch.no_grad():
        out = bank(hidden, idx, w)  # decode-sized (N < E slots) ...
        out2 = bank(
            torch.randn(64, SPEC.hidden_size), torch.randint(0, 8, (64, 2)), torch.rand(64, 2)
        )  # ... and N >= E
    monkeypatch.undo()
    assert out.shape == hidden.shape and out2.shape == (64, SPEC.hidden_size)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("quantize", [False, True], ids=["fp32", "nf4"])
def test_grouped_equals_per_expert_with_and_without_adapters(tiny_dir, adapter_dirs, quantize):
    base, _ = load_base_model(str(tiny_dir), device="cpu", quantize=quantize)
    x = torch.randint(0, 151_000, (3, 17), generator=torch.Generator().manual_seed(5))
    x1 = x[:1, :1]  # decode-sized: 2 assignments, fewer than the 8 experts
    plain_ref, plain_ref1 = _logits(base, x), _logits(base, x1)
    model, names = attach_adapters(base, [str(d) for d in adapter_dirs])
    refs = {}
    for name in names:
        model.base_model.set_adapter(name)
        refs[name] = (_logits(model, x), _logits(model, x1))
    enable_grouped_dispatch(model, names)
    with model.disable_adapter():
        assert _close(_logits(model, x), plain_ref, quantize)
        assert _close(_logits(model, x1), plain_ref1, quantize)
    for name in names:
        model.base_model.set_adapter(name)
        ref, ref1 = refs[name]
        assert (ref - plain_ref).abs().max().item() > 0.1  # the adapter matters
        assert _close(_logits(model, x), ref, quantize), name
        assert _close(_logits(model, x1), ref1, quantize), name
    disable_grouped_dispatch(model)  # the per-expert path still works on the shared storage
    model.base_model.set_adapter(names[0])
    assert _close(_logits(model, x), refs[names[0]][0], quantize)


def test_two_adapters_in_one_batch_equal_each_alone(tiny_dir, adapter_dirs, tmp_path):
    base, _ = load_base_model(str(tiny_dir), device="cpu", quantize=True)
    model, names = attach_adapters(base, [str(d) for d in adapter_dirs])
    enable_grouped_dispatch(model, names)
    inner = model.get_base_model()
    x = torch.randint(0, 151_000, (3, 9), generator=torch.Generator().manual_seed(7))
    rows = ["alpha", "beta", None]
    with select_adapters(inner, rows, names):
        mixed = _logits(inner, x)
    for i, name in enumerate(rows):
        with select_adapters(inner, [name], names):
            alone = _logits(inner, x[i : i + 1])
        assert (mixed[i] - alone[0]).abs().max().item() < 1e-2, name
    assert (mixed[0] - mixed[1]).abs().max().item() > 0.1 or not torch.equal(x[0], x[1])
    with pytest.raises(UnknownAdapter, match="gamma"):
        with select_adapters(inner, ["gamma"], names):
            pass


def test_engine_mixes_adapters_in_one_batch(tiny_dir, adapter_dirs):
    cfg = FormalizeConfig(
        model_dir=str(tiny_dir), device="cpu", adapter_dirs=[str(d) for d in adapter_dirs]
    )
    loaded = load(cfg)
    assert (
        loaded.adapters == ["alpha", "beta"]
        and loaded.info["grouped_dispatch_layers"] == SPEC.num_hidden_layers
    )
    tok = load_tokenizer(str(tiny_dir))
    eng = GenerationEngine(loaded.model, tok, max_batch=4, adapter_names=loaded.adapters)
    eng.eos_ids = set()
    prompt = tok("theorem foo", add_special_tokens=False)["input_ids"]
    try:
        alone = {
            a: eng.submit(prompt, SamplingParams(max_new_tokens=6, adapter=a)).wait(120).token_ids
            for a in ("alpha", "beta", None)
        }
        streams = {
            a: eng.submit(prompt, SamplingParams(max_new_tokens=6, adapter=a))
            for a in ("alpha", "beta", None)
        }
        together = {a: s.wait(120).token_ids for a, s in streams.items()}
        assert eng.stats.max_batch_seen >= 2
        assert together == alone
        assert len({tuple(v) for v in alone.values()}) >= 2  # the adapters change the greedy output
        with pytest.raises(UnknownAdapter):
            eng.submit(prompt, SamplingParams(adapter="gamma"))
    finally:
        eng.close()
    bad = FormalizeConfig(
        model_dir=str(tiny_dir),
        device="cpu",
        adapter_dirs=[str(adapter_dirs[0])],
        default_adapter="gamma",
    )
    with pytest.raises(ModelLoadError, match="default_adapter"):
        load(bad)
    json.dumps(loaded.info)  # the info is reportable
