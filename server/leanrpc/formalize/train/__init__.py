"""Training recipes for the Formalize model: SFT then GRPO, on TRL, over the unfused NF4 model.

Rooms:
    data       informal-formal pairs (JSONL or a `datasets` path) -> prompt/completion rows
               in the exact first-round prompt format Formalize serves
    peft_spec  the published adapter shapes (attention r=64/a=128, experts r=8/a=16;
               LoRA or DoRA) and the trainable NF4 model they go on
    recipe     run settings (micro-batch, accumulation, lr, steps, checkpointing, bf16 on GPU)
    sft        stage 1: TRL SFTTrainer, completion-only loss, optional packing
    grpo       stage 2: TRL GRPOTrainer, reward = leanrpc's composite gated reward
               through the client's TRL adapter
    cli        `python -m leanrpc.formalize.train {sft,grpo}` (and `leanrpc train`)

A trained adapter is saved to `<output_dir>/adapter` with PEFT's `save_pretrained`,
which is the layout `formalize.adapter_dirs` loads (loading.attach_adapters).

May import: leanrpc.formalize (its modeling/loading/prompts/wellformed rooms),
leanrpc.client (the reward adapter); torch, transformers, PEFT, TRL, datasets lazily.
"""
