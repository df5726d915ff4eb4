"""System B's dense stage: embed the Mathlib declarations once, retrieve the nearest to a statement.

Job: `Embedder`s (text -> unit vectors) and `DenseIndex` (the corpus embedded
once, cached on disk, cosine top-n for a query). retrieval.MathlibNames.search
calls it for the top 100 and reranks those with BM25 down to k.

Embedders, chosen by `formalize.retrieval_embedder`:
  "wordllama" (default)  WordLlama l2_supercat 256-d (the token embeddings of
      Llama 2 70B distilled into a static embedding model). Its wheel ships the
      weights (`wordllama/weights/l2_supercat_256.safetensors`, 16 MB) and the
      tokenizer, so it works offline and in CI. model2vec, the other static
      embedder, downloads its models from the hub at first use and ships none.
      WordLlama's own `load()` looks for the tokenizer in a folder name the
      wheel does not use and then tries the network, so the two shipped files
      are opened here directly (safetensors + tokenizers) and handed to its
      `WordLlamaInference`. Embedding 170k declarations takes ~10 s on one core.
  "sentence-transformers:<path>"  any local sentence-transformers model (the
      design's choice where a model is at hand; nothing is downloaded).
  "none"  no dense stage: BM25 alone.

The corpus text of a declaration is its name, its name words, its kind and its
module path words (the names file has no signatures or docstrings). The cache is
`<cache_dir>/<embedder id>-<sha256 of the corpus>.npy` (float16 on disk, float32 in
memory: 175 MB for 170k x 256), so a changed
names file or embedder is embedded anew and never mixed with an old cache.

Imports: nothing of leanrpc; numpy, wordllama / sentence-transformers lazily.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pathlib
from typing import Protocol, Sequence

log = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = (
    pathlib.Path(os.environ.get("LEANRPC_CACHE_DIR") or pathlib.Path.home() / ".cache" / "leanrpc")
    / "retrieval"
)


class Embedder(Protocol):
    id: str

    def embed(self, texts: Sequence[str]):  # -> np.ndarray [n, d] float32, unit rows
        ...


def _unit(vectors):
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class WordLlamaEmbedder:
    id = "wordllama-l2_supercat-256"

    def __init__(self) -> None:
        import wordllama
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference

        root = pathlib.Path(wordllama.__file__).parent
        tokenizer = Tokenizer.from_file(
            str(root / "tokenizers" / "l2_supercat_tokenizer_config.json")
        )
        with safe_open(str(root / "weights" / "l2_supercat_256.safetensors"), "np") as f:
            embedding = f.get_tensor("embedding.weight")
        self._model = WordLlamaInference(embedding, tokenizer)

    def embed(self, texts: Sequence[str]):
        return _unit(self._model.embed(list(texts), norm=False, batch_size=512))


class SentenceTransformerEmbedder:
    def __init__(self, path: str) -> None:
        from sentence_transformers import SentenceTransformer

        if not os.path.isdir(path):
            raise ValueError(f"sentence-transformers model {path!r} is not a local directory")
        self._model = SentenceTransformer(path, local_files_only=True)
        self.id = "st-" + pathlib.Path(path).name

    def embed(self, texts: Sequence[str]):
        return _unit(self._model.encode(list(texts), batch_size=256, normalize_embeddings=True))


def make_embedder(spec: str) -> Embedder | None:
    """`wordllama`, `sentence-transformers:<path>` or `none` (None: no dense stage)."""
    if spec in ("", "none"):
        return None
    if spec == "wordllama":
        return WordLlamaEmbedder()
    if spec.startswith("sentence-transformers:"):
        return SentenceTransformerEmbedder(spec.split(":", 1)[1])
    raise ValueError(
        f"retrieval_embedder must be wordllama, sentence-transformers:<path> or none, not {spec!r}"
    )


class DenseIndex:
    def __init__(
        self, docs: Sequence[str], embedder: Embedder, cache_dir: str | pathlib.Path | None = None
    ) -> None:
        import numpy as np

        self.embedder = embedder
        digest = hashlib.sha256("\n".join(docs).encode()).hexdigest()[:16]
        cache = pathlib.Path(cache_dir or DEFAULT_CACHE_DIR) / f"{embedder.id}-{digest}.npy"
        self.cache_path = cache
        self.from_cache = False
        if cache.is_file():
            matrix = np.load(cache)
            if matrix.shape[0] == len(docs):
                self.matrix = matrix.astype(np.float32)  # numpy has no fast fp16 matmul
                self.from_cache = True
                return
        self.matrix = embedder.embed(docs).astype(np.float32)
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp.npy")
            np.save(tmp, self.matrix.astype(np.float16))
            os.replace(tmp, cache)
        except OSError as exc:  # a read-only home still retrieves, it only re-embeds next time
            log.warning("cannot cache the dense index at %s: %s", cache, exc)

    def top(self, text: str, n: int = 100):
        """Indices of the n nearest declarations, nearest first, and their cosines."""
        import numpy as np

        q = self.embedder.embed([text])[0].astype(np.float32)
        scores = self.matrix @ q
        n = min(n, len(scores))
        idx = np.argpartition(-scores, n - 1)[:n]
        idx = idx[np.argsort(-scores[idx])]
        return idx, scores[idx]
