"""Loading the model stack from local paths: unfused Qwen3-MoE, NF4, PEFT adapters.

    model_dir (hub layout, per-expert keys; a fused-layout checkpoint is first
               converted to it, checkpoint.py)
      -> Qwen3MoeUnfusedForCausalLM.from_pretrained(quantization_config=NF4 + double quant,
                                                    output_loading_info=True)
           every nn.Linear but lm_head becomes Linear4bit while the tensors stream in;
           any missing, unexpected or mismatched weight refuses the load, naming the keys
      -> mark_unfused(model)                  (before PEFT sees it; see modeling.py)
      -> PeftModel.from_pretrained / load_adapter for each adapter dir, each under its name
      -> check that adapters whose config targets expert projections really sit on
         `...mlp.experts.{e}.{gate,up,down}_proj` modules
      -> grouped dispatch: each layer's experts banked (grouped.py)

Imports config, modeling, checkpoint, adapters and grouped (torch, transformers,
PEFT and bitsandbytes lazily).

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

from .adapters import adapter_names_for
from .checkpoint import convert_fused_checkpoint, expert_layout
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
    adapters: list[str]  # names, in bank order
    info: dict[str, Any]
    default_adapter: str | None = None  # the adapter of a request that names none


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


def _describe_keys(kind: str, keys) -> str:
    keys = sorted(keys)
    shown = ", ".join(keys[:8])
    more = f" and {len(keys) - 8} more" if len(keys) > 8 else ""
    return f"{len(keys)} {kind} weight(s): {shown}{more}"


def check_loading_info(model_dir: str, info: dict) -> None:
    """Raises ModelLoadError naming every missing, unexpected or mismatched weight."""
    problems = []
    if info.get("missing_keys"):
        problems.append(_describe_keys("missing", info["missing_keys"]))
    if info.get("unexpected_keys"):
        problems.append(_describe_keys("unexpected", info["unexpected_keys"]))
    if info.get("mismatched_keys"):
        problems.append(
            _describe_keys(
                "mismatched",
                [str(k[0]) if isinstance(k, tuple) else str(k) for k in info["mismatched_keys"]],
            )
        )
    if info.get("error_msgs"):
        problems.append("errors: " + "; ".join(map(str, info["error_msgs"]))[:500])
    if problems:
        raise ModelLoadError(f"{model_dir!r} does not match the model: " + "; ".join(problems))


def _per_expert_dir(model_dir: str, convert_dir: str | None, keep: list) -> str:
    """model_dir itself, or a per-expert conversion of a fused-layout checkpoint."""
    import tempfile

    layout = expert_layout(model_dir)
    if layout == "per_expert":
        return model_dir
    if layout == "mixed":
        raise ModelLoadError(
            f"{model_dir!r} holds both fused (experts.gate_up_proj) and per-expert keys"
        )
    if layout == "none":
        raise ModelLoadError(f"{model_dir!r} holds no expert weights (mlp.experts.*)")
    if convert_dir:
        target = pathlib.Path(convert_dir) / (
            pathlib.Path(model_dir).resolve().name + "-per-expert"
        )
    else:
        tmp = tempfile.TemporaryDirectory(prefix="leanrpc-per-expert-")
        keep.append(tmp)
        target = pathlib.Path(tmp.name)
    log.warning(
        "%s is in the fused expert layout; converting it to per-expert tensors in %s",
        model_dir,
        target,
    )
    try:
        return str(convert_fused_checkpoint(model_dir, target))
    except Exception as exc:
        raise ModelLoadError(
            f"converting the fused checkpoint {model_dir!r} failed: {type(exc).__name__}: {exc}"
        ) from exc


def load_base_model(
    model_dir: str,
    *,
    device: str = "auto",
    quantize: bool = True,
    compute_dtype: str = "bfloat16",
    convert_dir: str | None = None,
):
    """Loads the unfused model (NF4 + double quantization when `quantize`); returns (model, device).

    Raises ModelLoadError for a bad directory, a failed load, or any missing,
    unexpected or mismatched weight. A fused-layout checkpoint is converted first
    (into `convert_dir`, or a temporary directory removed after loading).
    """
    import torch

    _check_model_dir(model_dir)
    dev = resolve_device(device)
    kwargs: dict[str, Any] = {"local_files_only": True, "output_loading_info": True}
    if quantize:
        kwargs["quantization_config"] = nf4_config(compute_dtype)
        kwargs["dtype"] = getattr(torch, compute_dtype)
    else:
        kwargs["dtype"] = getattr(torch, compute_dtype) if dev.type == "cuda" else torch.float32
    kwargs["device_map"] = {"": dev.index if dev.type == "cuda" else "cpu"}
    keep: list = []
    try:
        source = _per_expert_dir(model_dir, convert_dir, keep)
        try:
            model, info = Qwen3MoeUnfusedForCausalLM.from_pretrained(source, **kwargs)
        except Exception as exc:
            raise ModelLoadError(
                f"loading {model_dir!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
    finally:
        for tmp in keep:
            tmp.cleanup()
    check_loading_info(model_dir, info)
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
        if (
            ".mlp.experts." in name
            and name.rsplit(".", 1)[-1] in EXPERT_PROJECTIONS
            and isinstance(module, LoraLayer)
        ):
            if adapter_name is None or adapter_name in module.lora_A:
                found.append(name)
    return found


def _targets_experts(adapter_dir: str) -> bool:
    cfg = json.loads((pathlib.Path(adapter_dir) / "adapter_config.json").read_text())
    targets = cfg.get("target_modules") or []
    if isinstance(targets, str):  # a regex, or "all-linear"
        return (
            targets == "all-linear"
            or any(p in targets for p in EXPERT_PROJECTIONS)
            or "experts" in targets
        )
    return any(t.rsplit(".", 1)[-1] in EXPERT_PROJECTIONS for t in targets)


def attach_adapters(model, adapter_dirs: list[str]):
    """Loads every adapter under its name (adapters.adapter_names_for). Returns (peft_model, names).

    The first adapter is PEFT's active one (for plain forwards); the engine picks
    each row's adapter itself (adapters.select_adapters). Raises ModelLoadError if a
    directory is missing, a name repeats, or an adapter targets the expert
    projections but none landed on an expert module (the PEFT fused-name rewrite
    drops them silently when model_type is still qwen3_moe).
    """
    from peft import PeftModel

    if model.config.model_type != "qwen3_moe_unfused":
        raise ModelLoadError("attach_adapters needs mark_unfused(model) first")
    try:
        named = adapter_names_for(adapter_dirs)
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from exc
    names: list[str] = []
    peft_model = None
    for name, adapter_dir in named:
        if not (pathlib.Path(adapter_dir) / "adapter_config.json").is_file():
            raise ModelLoadError(f"adapter directory {adapter_dir!r} has no adapter_config.json")
        try:
            if peft_model is None:
                peft_model = PeftModel.from_pretrained(
                    model, adapter_dir, adapter_name=name, is_trainable=False
                )
            else:
                peft_model.load_adapter(adapter_dir, adapter_name=name, is_trainable=False)
        except Exception as exc:
            raise ModelLoadError(
                f"loading adapter {adapter_dir!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if _targets_experts(adapter_dir) and not expert_adapter_modules(peft_model, name):
            raise ModelLoadError(
                f"adapter {adapter_dir!r} targets expert projections but none were adapted"
            )
        names.append(name)
    if peft_model is None:
        return model, names
    peft_model.base_model.set_adapter(names[0])
    peft_model.eval()
    return peft_model, names


def resolve_default_adapter(config: FormalizeConfig, names: list[str]) -> str | None:
    """The adapter a request without one gets (see FormalizeConfig.default_adapter)."""
    wanted = config.default_adapter
    if wanted == "none":
        return None
    if wanted in ("auto", ""):
        return names[0] if names else None
    if wanted not in names:
        raise ModelLoadError(
            f"formalize.default_adapter {wanted!r} is not a loaded adapter "
            f"({', '.join(names) or 'none loaded'})"
        )
    return wanted


def load(config: FormalizeConfig) -> LoadedModel:
    """Loads model, adapters and tokenizer as configured. Raises ModelLoadError with the reason."""
    import torch

    if not config.model_dir:
        raise ModelLoadError("no model weights configured (formalize.model_dir is unset)")
    t0 = time.perf_counter()
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    model, dev = load_base_model(
        config.model_dir,
        device=config.device,
        quantize=config.quantize,
        compute_dtype=config.compute_dtype,
        convert_dir=config.convert_dir or None,
    )
    n4 = count_quantized(model) if config.quantize else 0
    model, adapters = attach_adapters(model, list(config.adapter_dirs))
    default_adapter = resolve_default_adapter(config, adapters)
    banked = 0
    if config.grouped_dispatch:
        from .grouped import GroupedDispatchError, enable_grouped_dispatch

        try:
            banked = enable_grouped_dispatch(model, adapters)
        except GroupedDispatchError as exc:
            raise ModelLoadError(f"grouped expert dispatch: {exc}") from exc
    elif adapters:
        raise ModelLoadError(
            "adapters per request need grouped dispatch (formalize.grouped_dispatch = true)"
        )
    tokenizer = load_tokenizer(config.tokenizer_dir or config.model_dir)
    info: dict[str, Any] = {
        "load_s": round(time.perf_counter() - t0, 3),
        "device": str(dev),
        "linear4bit_modules": n4,
        "footprint_bytes": int(model.get_memory_footprint())
        if hasattr(model, "get_memory_footprint")
        else None,
        "expert_adapter_modules": len(expert_adapter_modules(model)) if adapters else 0,
        "grouped_dispatch_layers": banked,
        "adapters": adapters,
        "default_adapter": default_adapter,
    }
    if dev.type == "cuda":
        info["peak_vram_bytes"] = int(torch.cuda.max_memory_allocated(dev))
    log.info("formalize model loaded: %s", info)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        device=dev,
        quantized=config.quantize,
        adapters=adapters,
        info=info,
        default_adapter=default_adapter,
    )
