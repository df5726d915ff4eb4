"""Grouped expert dispatch: one layer's hit experts computed together, NF4 or dense, with per-row LoRA/DoRA.

Owns `ExpertBank` (one per sparse block) and `enable_grouped_dispatch(model)`.
Imports only torch and bitsandbytes (lazily); modeling.py calls into it.

The per-expert modules (`experts.{e}.{gate,up,down}_proj`, possibly wrapped by
PEFT) stay the checkpoint and adapter interface. Building a bank stacks each
projection's per-expert storage into one tensor and re-points every expert's
parameter at its slice, so memory is shared, not doubled:

    NF4   packed uint8 [E, out*in/2], absmax (nested: uint8 [E, nb] + fp32 [E, nb2]
          + offset [E], one shared code table), or fp32 absmax [E, nb]
    dense weight [E, out, in]
    LoRA  A [n_adapters + 1, E, r, in], B [n_adapters + 1, E, out, r] (the last index
          is "no adapter": zeros), scale [n_adapters + 1], and for DoRA the
          magnitude over the (constant, inference-time) weight norm [n_adapters + 1, E, out]
          (ones for plain LoRA)

A forward over T tokens with top-k routing has N = T*k assignments. The layer
uses S = min(E, N) expert slots: the hit experts are moved to the front with a
stable sort on the device (no `.tolist()`, no `.item()`), so the slot count is
fixed by shapes alone. Only the S slots' NF4 weights are dequantized (one
bitsandbytes call per projection over the concatenated slots), assignments are
sorted by slot, and each projection is one `grouped_mm` with offsets from a
device-side count (a gather + `bmm` where `grouped_mm` cannot run). LoRA deltas are
computed in the same pass per assignment row, each row with its own adapter:

    y = mag[a, e] * (x W_e^T + scale[a] * (x A[a,e]^T) B[a,e]^T)

which is PEFT's DoRA inference arithmetic ((m-1)·base + m·s·lora added to base)
and plain LoRA when mag = 1.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


class GroupedDispatchError(ValueError):
    """The experts cannot be banked (an unsupported layer or adapter kind); the message says which."""


def base_layer(module: nn.Module) -> nn.Module:
    return module.get_base_layer() if hasattr(module, "get_base_layer") else module


def _is_nf4(layer: nn.Module) -> bool:
    qs = getattr(getattr(layer, "weight", None), "quant_state", None)
    return qs is not None


@dataclasses.dataclass
class _NF4Stack:
    packed: torch.Tensor  # uint8 [E, out*in/2]
    absmax: torch.Tensor  # fp32 [E, nb], or uint8 [E, nb] when nested
    absmax2: torch.Tensor | None  # fp32 [E, nb2] (nested only)
    offset: torch.Tensor | None  # fp32 [E] (nested only)
    code2: torch.Tensor | None  # fp32 [256] (nested only)
    block2_index: torch.Tensor | None  # long [nb]: absmax block -> its second-level block
    code: torch.Tensor
    blocksize: int
    shape: tuple[int, int]  # (out, in) of one expert
    dtype: torch.dtype

    def dequantize(self, experts: torch.Tensor) -> torch.Tensor:
        """Dequantized weights [S, out, in] of the given experts, one bitsandbytes call."""
        import bitsandbytes.functional as F

        s = experts.shape[0]
        if self.absmax2 is None:
            absmax = self.absmax[experts]
        else:
            absmax = (
                self.code2[self.absmax[experts].long()]
                * self.absmax2[experts][:, self.block2_index]
                + self.offset[experts, None]
            )
        out, inp = self.shape
        state = F.QuantState(
            absmax=absmax.reshape(-1).float(),
            shape=torch.Size([s * out, inp]),
            code=self.code,
            blocksize=self.blocksize,
            quant_type="nf4",
            dtype=self.dtype,
        )
        w = F.dequantize_4bit(self.packed[experts].reshape(-1, 1), state)
        return w.view(s, out, inp)


def _stack_nf4(layers: list[nn.Module]) -> _NF4Stack:
    first = layers[0].weight.quant_state
    if first.quant_type != "nf4":
        raise GroupedDispatchError(
            f"grouped dispatch needs NF4 experts, found {first.quant_type!r}"
        )
    for layer in layers:
        if getattr(layer.weight.quant_state, "packing_format_for_cpu", False):
            # bitsandbytes repacks CPU weights on a layer's first forward; undo it to the standard layout.
            from bitsandbytes.functional import _convert_weight_packed_for_cpu_inverse

            layer.weight.data, layer.weight.quant_state = _convert_weight_packed_for_cpu_inverse(
                layer.weight.data, layer.weight.quant_state
            )
    first = layers[0].weight.quant_state
    packed = torch.stack([layer.weight.data.reshape(-1) for layer in layers])
    for e, layer in enumerate(layers):
        layer.weight.data = packed[e].view(-1, 1)
    nested = bool(first.nested)
    if nested:
        absmax = torch.stack([layer.weight.quant_state.absmax for layer in layers])
        absmax2 = torch.stack([layer.weight.quant_state.state2.absmax for layer in layers]).float()
        offset = torch.stack(
            [
                torch.as_tensor(layer.weight.quant_state.offset, device=absmax.device)
                .float()
                .reshape(())
                for layer in layers
            ]
        )
        code2 = first.state2.code.float()
        for layer in layers:
            if not torch.equal(layer.weight.quant_state.state2.code.float(), code2):
                raise GroupedDispatchError("experts use different double-quantization code tables")
        for e, layer in enumerate(layers):
            layer.weight.quant_state.absmax = absmax[e]
        block2 = torch.arange(absmax.shape[1], device=absmax.device) // first.state2.blocksize
    else:
        absmax = torch.stack([layer.weight.quant_state.absmax.float() for layer in layers])
        absmax2 = offset = code2 = block2 = None
    return _NF4Stack(
        packed=packed,
        absmax=absmax,
        absmax2=absmax2,
        offset=offset,
        code2=code2,
        block2_index=block2,
        code=first.code,
        blocksize=first.blocksize,
        shape=tuple(first.shape),
        dtype=first.dtype,
    )


@dataclasses.dataclass
class _AdapterStack:
    A: torch.Tensor  # [n+1, E, r, in]
    B: torch.Tensor  # [n+1, E, out, r]
    scale: torch.Tensor  # [n+1]
    mag: torch.Tensor  # [n+1, E, out]


def dequantized_weight(layer: nn.Module) -> torch.Tensor:
    if _is_nf4(layer):
        import bitsandbytes.functional as F

        return F.dequantize_4bit(layer.weight.data, layer.weight.quant_state).float()
    return layer.weight.detach().float()


def _stack_adapters(
    wrappers: list[nn.Module], adapter_names: list[str], dtype, device
) -> _AdapterStack | None:
    if not adapter_names or not hasattr(wrappers[0], "lora_A"):
        return None
    n, E = len(adapter_names), len(wrappers)
    first = wrappers[0]
    base = base_layer(first)
    out_f, in_f = (base.out_features, base.in_features)
    present = [a for a in adapter_names if a in first.lora_A]
    if not present:
        return None
    r = max(first.lora_A[a].out_features for a in present)
    A = torch.zeros(n + 1, E, r, in_f, dtype=dtype, device=device)
    B = torch.zeros(n + 1, E, out_f, r, dtype=dtype, device=device)
    scale = torch.zeros(n + 1, dtype=dtype, device=device)
    mag = torch.ones(n + 1, E, out_f, dtype=dtype, device=device)
    for i, name in enumerate(adapter_names):
        if name not in first.lora_A:
            continue
        scale[i] = float(first.scaling[name])
        for e, w in enumerate(wrappers):
            if name not in w.lora_A:
                raise GroupedDispatchError(
                    f"adapter {name!r} sits on some experts of a layer but not all"
                )
            if getattr(w, "lora_bias", {}).get(name, False):
                raise GroupedDispatchError(
                    f"adapter {name!r} has a LoRA bias; not supported by grouped dispatch"
                )
            a, b = w.lora_A[name].weight, w.lora_B[name].weight
            A[i, e, : a.shape[0]] = a.detach().to(dtype)
            B[i, e, :, : b.shape[1]] = b.detach().to(dtype)
            variant = getattr(w, "lora_variant", {}).get(name)
            if variant is not None:
                if "Dora" not in type(variant).__name__:
                    raise GroupedDispatchError(
                        f"adapter {name!r} uses {type(variant).__name__}; only LoRA and DoRA"
                    )
                weight = dequantized_weight(base_layer(w))
                merged = weight + float(w.scaling[name]) * (b.detach().float() @ a.detach().float())
                norm = torch.linalg.norm(merged, dim=1)
                magnitude = w.lora_magnitude_vector[name].weight.detach().float()
                mag[i, e] = (magnitude / norm).to(dtype)
    return _AdapterStack(A=A, B=B, scale=scale, mag=mag)


def _grouped_mm_fn():
    fn = getattr(torch.nn.functional, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)
    return fn


_GROUPED_OK: dict[tuple[str, torch.dtype], bool] = {}


def grouped_matmul(
    x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor, slot: torch.Tensor
) -> torch.Tensor:
    """x [N, in] sorted by slot, w [S, out, in], offs int32 [S] (cumulative ends) -> [N, out] = x_n w_slot(n)^T.

    On CUDA: `grouped_mm` where it runs for the dtype (probed once). Elsewhere, or
    when it cannot run: each row's weight gathered and one `bmm` (chunked, no host
    sync) -- on CPU that beats `grouped_mm`, which loops over the groups.
    """
    fn = _grouped_mm_fn()
    key = (x.device.type, x.dtype)
    if fn is not None and x.device.type == "cuda" and _GROUPED_OK.get(key, True):
        try:
            y = fn(x, w.transpose(1, 2), offs=offs)
            _GROUPED_OK[key] = True
            return y
        except (RuntimeError, NotImplementedError, TypeError):
            _GROUPED_OK[key] = False
    out = []
    for start in range(0, x.shape[0], 512):
        xs, ss = x[start : start + 512], slot[start : start + 512]
        out.append(torch.bmm(xs[:, None, :], w[ss].transpose(1, 2)).squeeze(1))
    return torch.cat(out) if len(out) != 1 else out[0]


class ExpertBank:
    """The stacked storage of one layer's experts and the grouped forward (not an nn.Module: no state_dict entries)."""

    def __init__(self, experts: nn.ModuleList, act_fn, adapter_names: list[str]) -> None:
        self.num_experts = len(experts)
        self.act_fn = act_fn
        self.adapter_names = list(adapter_names)
        self.quantized = _is_nf4(base_layer(experts[0].gate_proj))
        self._nf4: dict[str, _NF4Stack] = {}
        self._dense: dict[str, torch.Tensor] = {}
        self._adapters: dict[str, _AdapterStack | None] = {}
        for p in PROJECTIONS:
            wrappers = [getattr(expert, p) for expert in experts]
            bases = [base_layer(w) for w in wrappers]
            if any(getattr(b, "bias", None) is not None for b in bases):
                raise GroupedDispatchError(f"expert {p} has a bias; not supported")
            if self.quantized:
                self._nf4[p] = _stack_nf4(bases)
                dtype, device = self._nf4[p].dtype, self._nf4[p].packed.device
            else:
                stacked = torch.stack([b.weight.data for b in bases])
                for e, b in enumerate(bases):
                    b.weight.data = stacked[e]
                self._dense[p] = stacked
                dtype, device = stacked.dtype, stacked.device
            self._adapters[p] = _stack_adapters(wrappers, self.adapter_names, dtype, device)

    @property
    def has_adapters(self) -> bool:
        return any(v is not None for v in self._adapters.values())

    def active_adapter_index(self, wrapper: nn.Module, tokens: int) -> torch.Tensor | None:
        """Per-token adapter indices for PEFT's active adapter on `wrapper` (None if no adapter applies)."""
        if not self.has_adapters or getattr(wrapper, "disable_adapters", False):
            return None
        active = [a for a in getattr(wrapper, "active_adapters", []) if a in self.adapter_names]
        if not active:
            return None
        if len(active) > 1:
            raise GroupedDispatchError(
                f"several adapters active at once ({', '.join(active)}); grouped dispatch "
                "applies one adapter per row (adapters.select_adapters)"
            )
        device = self._adapters_device()
        return torch.full(
            (tokens,), self.adapter_names.index(active[0]), dtype=torch.long, device=device
        )

    def _adapters_device(self) -> torch.device:
        return next(a.A.device for a in self._adapters.values() if a is not None)

    def _weights(self, p: str, experts: torch.Tensor) -> torch.Tensor:
        if self.quantized:
            return self._nf4[p].dequantize(experts)
        return self._dense[p][experts]

    def _project(self, p: str, x, experts, slot, offs, rows_expert, rows_adapter) -> torch.Tensor:
        w = self._weights(p, experts)  # [S, out, in]
        x = x.to(w.dtype)
        y = grouped_matmul(x, w, offs, slot)
        ad = self._adapters[p]
        if ad is not None and rows_adapter is not None:
            a = ad.A[rows_adapter, rows_expert]  # [N, r, in]
            b = ad.B[rows_adapter, rows_expert]  # [N, out, r]
            low = torch.bmm(torch.bmm(x[:, None, :], a.transpose(1, 2)), b.transpose(1, 2)).squeeze(
                1
            )
            y = ad.mag[rows_adapter, rows_expert] * (y + ad.scale[rows_adapter, None] * low)
        return y

    def __call__(
        self,
        hidden: torch.Tensor,
        top_k_index: torch.Tensor,
        top_k_weights: torch.Tensor,
        token_adapter: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """hidden [T, H], top_k_index/weights [T, k], token_adapter long [T] (index into adapter_names,
        len(adapter_names) = none) or None (no adapter) -> [T, H]."""
        T, k = top_k_index.shape
        E = self.num_experts
        n = T * k
        dev = hidden.device
        eid = top_k_index.reshape(-1)
        tok = torch.arange(T, device=dev).repeat_interleave(k)
        s = min(E, n)
        if s == E:
            experts = torch.arange(E, device=dev)
            slot = eid
        else:
            hit = torch.zeros(E, dtype=torch.bool, device=dev)
            hit[eid] = True
            order = torch.argsort((~hit).to(torch.int8), stable=True)  # hit experts first
            experts = order[:s]
            slot_of = torch.empty_like(order)
            slot_of[order] = torch.arange(E, device=dev)
            slot = slot_of[eid]
        perm = torch.argsort(slot, stable=True)
        slot = slot[perm]
        tok = tok[perm]
        rows_expert = eid[perm]
        counts = torch.zeros(s, dtype=torch.int32, device=dev).index_add_(
            0, slot, torch.ones_like(slot, dtype=torch.int32)
        )
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        rows_adapter = (
            token_adapter[tok] if token_adapter is not None and self.has_adapters else None
        )
        x = hidden[tok]
        gate = self._project("gate_proj", x, experts, slot, offs, rows_expert, rows_adapter)
        up = self._project("up_proj", x, experts, slot, offs, rows_expert, rows_adapter)
        h = self.act_fn(gate) * up
        y = self._project("down_proj", h, experts, slot, offs, rows_expert, rows_adapter)
        y = y * top_k_weights.reshape(-1)[perm, None].to(y.dtype)
        out = torch.zeros_like(hidden)
        return out.index_add_(0, tok, y.to(out.dtype))


def enable_grouped_dispatch(model: nn.Module, adapter_names: list[str] | None = None) -> int:
    """Banks every unfused experts module of `model` (a PeftModel or its base); returns how many.

    `adapter_names` orders the adapters (index i in a token's adapter id); default:
    every LoRA adapter found on the experts, sorted. Call after loading adapters
    and before the first forward.
    """
    from .modeling import Qwen3MoeUnfusedExperts

    blocks = [m for m in model.modules() if isinstance(m, Qwen3MoeUnfusedExperts)]
    if adapter_names is None:
        found = set()
        for block in blocks:
            lora_a = getattr(block[0].gate_proj, "lora_A", None)
            if lora_a is not None:
                found |= set(lora_a.keys())
        adapter_names = sorted(found)
    for block in blocks:
        block.set_bank(ExpertBank(block, block[0].act_fn, adapter_names))
    return len(blocks)


def disable_grouped_dispatch(model: nn.Module) -> None:
    """Back to the per-expert loop (the banks' storage stays shared with the modules)."""
    from .modeling import Qwen3MoeUnfusedExperts

    for m in model.modules():
        if isinstance(m, Qwen3MoeUnfusedExperts):
            m.set_bank(None)
