"""Loading the model stack from local paths: unfused Qwen3-MoE, NF4, PEFT adapters.

    model_dir (hub layout, per-expert keys)
      -> Qwen3MoeUnfusedForCausalLM.from_pretrained(quantization_config=NF4 + double quant)
           every nn.Linear but lm_head becomes Linear4bit while the tensors stream in
      -> mark_unfused(model)                  (before PEFT sees it; see modeling.py)
      -> PeftModel.from_pretrained / load_adapter for each adapter dir, all active
      -> check that adapters whose config targets expert projections really sit on
         `...mlp.experts.{e}.{gate,up,down}_proj` modules

Nothing is downloaded: every path must be a local directory.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
import time
from typing import Any

from .config import FormalizeConfig
from .modeling import EXPERT_PROJECTIONS, Qwen3MoeUnfusedForCausalLM, mark_unfused

log = logging.getLogger(__name__)

SUPPORTED_MODEL_TYPES = ("qwen3_moe",)


class ModelLoadError(Exception):
    """The configured weights or adapters cannot be used; the message says why."""


@dataclasses.dataclass
class LoadedModel:
    model: Any  # Qwen3MoeUnfusedForCausalLM, or a PeftModel around it
    tokenizer: Any
    device: Any  # torch.device
    quantized: bool
    adapters: list[str]
    info: dict[str, Any]


def resolve_device(device: str):
    import torch

    if device == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"formalize.device is {device!r} but CUDA is not available")
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda:0")
    return dev


def nf4_config(compute_dtype: str = "bfloat16"):
    import torch
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=getattr(torch, compute_dtype),
    )


def _check_model_dir(model_dir: str) -> dict:
    path = pathlib.Path(model_dir)
    if not path.is_dir():
        raise ModelLoadError(f"formalize.model_dir {model_dir!r} is not a directory")
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise ModelLoadError(f"{model_dir!r} has no config.json")
    cfg = json.loads(cfg_path.read_text())
    if cfg.get("model_type") not in SUPPORTED_MODEL_TYPES:
        raise ModelLoadError(
            f"{model_dir!r} holds model_type {cfg.get('model_type')!r}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    if not any(p.suffix == ".safetensors" for p in path.iterdir()):
        raise ModelLoadError(f"{model_dir!r} has no .safetensors weights")
    return cfg


def load_tokenizer(directory: str):
    from transformers import AutoTokenizer

    if not os.path.isdir(directory):
        raise ModelLoadError(f"tokenizer directory {directory!r} does not exist")
    try:
        return AutoTokenizer.from_pretrained(directory, local_files_only=True)
    except Exception as exc:  # transformers raises a zoo of types here
        raise ModelLoadError(f"cannot load a tokenizer from {directory!r}: {exc}") from exc


def load_base_model(model_dir: str, *, device: str = "auto", quantize: bool = True,
                    compute_dtype: str = "bfloat16"):
    """Loads the unfused model (NF4 + double quantization when `quantize`); returns (model, device)."""
    import torch

    _check_model_dir(model_dir)
    dev = resolve_device(device)
    kwargs: dict[str, Any] = {"local_files_only": True}
    if quantize:
        kwargs["quantization_config"] = nf4_config(compute_dtype)
        kwargs["dtype"] = getattr(torch, compute_dtype)
    else:
        kwargs["dtype"] = getattr(torch, compute_dtype) if dev.type == "cuda" else torch.float32
    kwargs["device_map"] = {"": dev.index if dev.type == "cuda" else "cpu"}
    try:
        model = Qwen3MoeUnfusedForCausalLM.from_pretrained(model_dir, **kwargs)
    except Exception as exc:
        raise ModelLoadError(f"loading {model_dir!r} failed: {type(exc).__name__}: {exc}") from exc
    mark_unfused(model)
    model.eval()
    return model, dev


def count_quantized(model) -> int:
    import bitsandbytes as bnb

    return sum(1 for m in model.modules() if isinstance(m, bnb.nn.Linear4bit))


def expert_adapter_modules(model, adapter_name: str | None = None) -> list[str]:
    """Names of expert projections that carry a LoRA/DoRA layer (for `adapter_name`, or any)."""
    from peft.tuners.lora import LoraLayer

    found = []
    for name, module in model.named_modules():
        if ".mlp.experts." in name and name.rsplit(".", 1)[-1] in EXPERT_PROJECTIONS and isinstance(module, LoraLayer):
            if adapter_name is None or adapter_name in module.lora_A:
                found.append(name)
    return found


def _targets_experts(adapter_dir: str) -> bool:
    cfg = json.loads((pathlib.Path(adapter_dir) / "adapter_config.json").read_text())
    targets = cfg.get("target_modules") or []
    if isinstance(targets, str):  # a regex, or "all-linear"
        return targets == "all-linear" or any(p in targets for p in EXPERT_PROJECTIONS) or "experts" in targets
    return any(t.rsplit(".", 1)[-1] in EXPERT_PROJECTIONS for t in targets)


def attach_adapters(model, adapter_dirs: list[str]):
    """Loads every adapter, all active. Returns (peft_model, names).

    Raises ModelLoadError if a directory is missing, or if an adapter targets the
    expert projections but none landed on an expert module (the PEFT fused-name
    rewrite drops them silently when model_type is still qwen3_moe).
    """
    from peft import PeftModel

    if model.config.model_type != "qwen3_moe_unfused":
        raise ModelLoadError("attach_adapters needs mark_unfused(model) first")
    names: list[str] = []
    peft_model = None
    for i, adapter_dir in enumerate(adapter_dirs):
        if not (pathlib.Path(adapter_dir) / "adapter_config.json").is_file():
            raise ModelLoadError(f"adapter directory {adapter_dir!r} has no adapter_config.json")
        name = f"adapter{i}"
        try:
            if peft_model is None:
                peft_model = PeftModel.from_pretrained(model, adapter_dir, adapter_name=name, is_trainable=False)
            else:
                peft_model.load_adapter(adapter_dir, adapter_name=name, is_trainable=False)
        except Exception as exc:
            raise ModelLoadError(f"loading adapter {adapter_dir!r} failed: {type(exc).__name__}: {exc}") from exc
        if _targets_experts(adapter_dir) and not expert_adapter_modules(peft_model, name):
            raise ModelLoadError(f"adapter {adapter_dir!r} targets expert projections but none were adapted")
        names.append(name)
    if peft_model is None:
        return model, names
    # Stack all adapters: set_adapter on the tuner accepts a list.
    peft_model.base_model.set_adapter(names)
    peft_model.eval()
    return peft_model, names


def load(config: FormalizeConfig) -> LoadedModel:
    """Loads model, adapters and tokenizer as configured. Raises ModelLoadError with the reason."""
    import torch

    if not config.model_dir:
        raise ModelLoadError("no model weights configured (formalize.model_dir is unset)")
    t0 = time.perf_counter()
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    model, dev = load_base_model(
        config.model_dir, device=config.device, quantize=config.quantize, compute_dtype=config.compute_dtype
    )
    n4 = count_quantized(model) if config.quantize else 0
    model, adapters = attach_adapters(model, list(config.adapter_dirs))
    tokenizer = load_tokenizer(config.tokenizer_dir or config.model_dir)
    info: dict[str, Any] = {
        "load_s": round(time.perf_counter() - t0, 3),
        "device": str(dev),
        "linear4bit_modules": n4,
        "footprint_bytes": int(model.get_memory_footprint()) if hasattr(model, "get_memory_footprint") else None,
        "expert_adapter_modules": len(expert_adapter_modules(model)) if adapters else 0,
    }
    if dev.type == "cuda":
        info["peak_vram_bytes"] = int(torch.cuda.max_memory_allocated(dev))
    log.info("formalize model loaded: %s", info)
    return LoadedModel(model=model, tokenizer=tokenizer, device=dev, quantized=config.quantize,
                       adapters=adapters, info=info)
