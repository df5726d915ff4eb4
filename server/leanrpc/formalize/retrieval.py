"""Mathlib name retrieval.

System A, `MathlibNames.did_you_mean(name)`: fuzzy candidates for a name Lean did
not know. Candidates come from four sources (case-insensitive exact match, same
last component, shared name words weighted by IDF, and a character-level edit
distance of at most 2 over every name) and are re-ranked by `difflib`
similarity plus a bonus for an edit distance of 1 or 2. The edit-distance
source is `rapidfuzz` (`process.extract` with `Levenshtein.distance`, C++, about
30 ms over 170k names on a quiet core): word-based sources cannot see one-letter
typos in short names (`Real.logg`, `Nat.Prme`, `Real.sqrrt`, `Finset.rnge` share
no word with their targets), and a hand-written edit-distance scan in Python
would cost seconds.

System B, `MathlibNames.search(text)`: dense then lexical. With an embedder
attached (`enable_dense`, dense.py; the server's default is WordLlama, shipped in
its wheel), the declarations nearest to the informal statement in embedding
space (top `dense_n` = 100) are reranked by BM25 down to k. Without one it is
BM25 alone over all declarations. BM25 runs over each declaration's name
words and module path words, queried with the informal statement (lower-cased
words, crude plural stripping, a small table from math English and LaTeX to
Mathlib's vocabulary). Definitions and classes get a small boost: a statement
needs the concepts, rarely a specific lemma. In the rerank, a candidate BM25
scores 0 keeps its dense order behind those it scores.

Two BM25s, on purpose: the rerank is `bm25s` (a kept library) over the 100 dense
candidates, with IDF over those candidates, so the words that tell them apart
weigh most (milliseconds). BM25 alone over all 170k declarations keeps the
numpy postings below: bm25s 0.3.16 builds its index in a per-document Python
loop, 54 s on a loaded core against 1.7 s here, paid by the first request.

The names file is `shared/datasets/mathlib-decl-names/mathlib_decls.tsv`
(name, kind, module; Mathlib of June 2024). It is stale for newer toolchains,
so suggestions are hints for the model, which Lean still checks.
"""

from __future__ import annotations

import collections
import difflib
import functools
import math
import threading
from typing import TYPE_CHECKING, Iterable

from .words import module_words, name_words, query_words, stem

if TYPE_CHECKING:
    import numpy as np

_DEF_KINDS = ("def", "class", "structure", "abbrev", "inductive", "irreducible_def")


class MathlibNames:
    """The declaration list with both indexes; construct once and share (thread-safe reads)."""

    def __init__(self, rows: Iterable[tuple[str, str, str]]) -> None:
        self.names: list[str] = []
        self.kinds: list[str] = []
        self.modules: list[str] = []
        for name, kind, module in rows:
            self.names.append(name)
            self.kinds.append(kind)
            self.modules.append(module)
        self._lower: dict[str, int] = {}
        self._lower_names: list[str] = [n.lower() for n in self.names]
        self._by_last: dict[str, list[int]] = collections.defaultdict(list)
        self._name_index: dict[str, list[int]] = collections.defaultdict(list)
        for i, name in enumerate(self.names):
            low = name.lower()
            self._lower.setdefault(low, i)
            self._by_last[low.rsplit(".", 1)[-1]].append(i)
            for w in set(name_words(name)):
                self._name_index[w].append(i)
        n = max(1, len(self.names))
        self._idf_name = {w: math.log(1 + n / len(ids)) for w, ids in self._name_index.items()}
        self._bm25: _BM25 | None = None
        self._bm25_lock = threading.Lock()
        self.dense = None  # dense.DenseIndex once enable_dense ran
        self.dense_n = 100

    @classmethod
    def from_tsv(cls, path: str) -> "MathlibNames":
        def rows():
            with open(path, encoding="utf-8") as f:
                header = f.readline().rstrip("\n").split("\t")
                if header[:3] != ["name", "kind", "module"]:
                    raise ValueError(
                        f"{path}: expected a name/kind/module TSV header, got {header}"
                    )
                for line in f:
                    parts = line.rstrip("\n").split("\t")
                    if len(parts) >= 3 and parts[0]:
                        yield parts[0], parts[1], parts[2]

        return cls(rows())

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: str) -> bool:
        i = self._lower.get(name.lower())
        return i is not None and self.names[i] == name

    # ---------------------------------------------------------------- System A
    def did_you_mean(self, name: str, k: int = 5, *, cutoff: float = 0.55) -> list[str]:
        """Up to k known names close to `name`, best first."""
        if not name or k <= 0:
            return []
        low = name.lower()
        last = low.rsplit(".", 1)[-1]
        cands: set[int] = set()
        exact = self._lower.get(low)
        if exact is not None:
            cands.add(exact)
        cands.update(self._by_last.get(last, ())[:2000])
        weights: collections.Counter[int] = collections.Counter()
        for w in set(name_words(name)):
            ids = self._name_index.get(w)
            if ids is None or len(ids) > 20000:  # 'nat', 'le'... say little on their own
                continue
            idf = self._idf_name[w]
            for i in ids:
                weights[i] += idf
        cands.update(i for i, _ in weights.most_common(400))
        edits = _close_by_edits(low, self._lower_names)
        cands.update(edits)
        if not cands:
            return []
        scored = []
        matcher = difflib.SequenceMatcher(autojunk=False)
        matcher.set_seq2(low)
        for i in cands:
            cand = self.names[i]
            if cand == name:
                continue
            cl = cand.lower()
            matcher.set_seq1(cl)
            score = matcher.ratio()
            cand_last = cl.rsplit(".", 1)[-1]
            if cand_last == last:
                score += 0.15
            elif difflib.SequenceMatcher(None, cand_last, last).ratio() > 0.85:
                score += 0.05
            if cl == low:
                score += 0.5  # only the capitalization differs
            elif i in edits:
                score += 0.25 if edits[i] == 1 else 0.1  # a typo away
            scored.append((score, len(cand), cand))
        scored.sort(key=lambda t: (-t[0], t[1], t[2]))
        return [c for s, _, c in scored[:k] if s >= cutoff]

    # ---------------------------------------------------------------- System B
    def corpus_texts(self) -> list[str]:
        """What the dense stage embeds for each declaration (name, its words, kind, module words)."""
        return [
            f"{n} {' '.join(name_words(n))} {kd.split('(')[0]} {' '.join(module_words(m))}"
            for n, kd, m in zip(self.names, self.kinds, self.modules)
        ]

    def enable_dense(self, embedder, cache_dir=None, *, dense_n: int = 100) -> None:
        """Embeds the declarations (or reads them from the disk cache) and turns the dense stage on."""
        from .dense import DenseIndex

        self.dense = DenseIndex(self.corpus_texts(), embedder, cache_dir)
        self.dense_n = dense_n

    def _bm25_scores(self, text: str):
        with self._bm25_lock:
            if self._bm25 is None:
                self._bm25 = _BM25(
                    [name_words(n) + module_words(m) for n, m in zip(self.names, self.modules)]
                )
        scores = self._bm25.scores(query_words(text))
        return None if scores is None else scores * self._def_boost

    def search(self, text: str, k: int = 8, *, dense: bool = True) -> list[tuple[str, str, str]]:
        """Top-k (name, kind, module) for an informal statement: dense top-n reranked by BM25
        when the dense stage is on (and `dense`), else BM25 over everything."""
        if k <= 0:
            return []
        import numpy as np

        scores = None if (dense and self.dense is not None) else self._bm25_scores(text)
        if dense and self.dense is not None:
            cand, cos = self.dense.top(text, self.dense_n)
            lexical = _rerank_bm25(
                [name_words(self.names[i]) + module_words(self.modules[i]) for i in cand],
                query_words(text),
            )
            lexical *= self._def_boost[cand]
            # BM25 first; the dense order breaks ties (and orders the BM25 zeros)
            order = np.lexsort((-cos, -lexical))
            top = cand[order]
            scores = None
        elif scores is None:
            return []
        else:
            top = np.argpartition(-scores, min(k * 3, len(scores) - 1))[: k * 3]
            top = top[np.argsort(-scores[top])]
        out, seen = [], set()
        for i in top:
            if len(out) >= k or (scores is not None and scores[i] <= 0):
                break
            name = self.names[i]
            if name in seen:
                continue
            seen.add(name)
            out.append((name, self.kinds[i], self.modules[i]))
        return out

    @functools.cached_property
    def _def_boost(self) -> "np.ndarray":
        import numpy as np

        arr = np.ones(len(self.names), dtype=np.float32)
        arr[[i for i, kd in enumerate(self.kinds) if kd.split("(")[0] in _DEF_KINDS]] = 1.3
        return arr


def _close_by_edits(low: str, lowered: list[str]) -> dict[int, int]:
    """{index: edit distance} of the (lower-cased) names a typo or two from `low`.

    Two edits only from 8 characters on: `sqrt` is 2 edits from `zsqrtd`, a
    different thing, while `real.sqrrt` -> `real.sqrt` is the typo we look for.
    """
    if len(low) < 4:  # 'sq' is an edit or two from hundreds of names: no signal
        return {}
    max_edits = 1 if len(low) < 8 else 2
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    found = process.extract(
        low, lowered, scorer=Levenshtein.distance, score_cutoff=max_edits, limit=50
    )
    return {i: int(d) for _, d, i in found}


class _BM25:
    def __init__(self, docs: list[list[str]], k1: float = 1.2, b: float = 0.75) -> None:
        import numpy as np

        self.k1, self.b = k1, b
        postings: dict[str, tuple[list[int], list[int]]] = {}
        lengths = np.zeros(len(docs), dtype=np.float32)
        for i, words in enumerate(docs):
            lengths[i] = len(words)
            for w, tf in collections.Counter(stem(x) for x in words).items():
                ids, tfs = postings.setdefault(w, ([], []))
                ids.append(i)
                tfs.append(tf)
        self.n = len(docs)
        self.norm = k1 * (
            1 - b + b * lengths / max(1.0, float(lengths.mean()) if len(docs) else 1.0)
        )
        self.postings = {
            w: (np.asarray(ids, dtype=np.int32), np.asarray(tfs, dtype=np.float32))
            for w, (ids, tfs) in postings.items()
        }

    def scores(self, words: list[str]) -> "np.ndarray | None":
        import numpy as np

        scores = np.zeros(self.n, dtype=np.float32)
        hit = False
        for w, qtf in collections.Counter(stem(w) for w in words).items():
            p = self.postings.get(w)
            if p is None:
                continue
            ids, tfs = p
            idf = math.log(1 + (self.n - len(ids) + 0.5) / (len(ids) + 0.5))
            scores[ids] += qtf * idf * tfs * (self.k1 + 1) / (tfs + self.norm[ids])
            hit = True
        return scores if hit else None


def _rerank_bm25(docs: list[list[str]], query: list[str]) -> "np.ndarray":
    """bm25s scores of the dense candidates for the query (IDF over the candidates themselves)."""
    import bm25s
    import numpy as np

    stemmed = [[stem(w) for w in d] or ["_"] for d in docs]
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(stemmed, show_progress=False)
    vocab = retriever.vocab_dict
    q = [w for w in (stem(w) for w in query) if w in vocab]
    if not q:
        return np.zeros(len(docs), dtype=np.float32)
    return np.asarray(retriever.get_scores(q), dtype=np.float32)


_SHARED: dict[str, MathlibNames] = {}
_SHARED_LOCK = threading.Lock()


def load_names(path: str) -> MathlibNames:
    """One MathlibNames per path per process (building takes a few seconds)."""
    with _SHARED_LOCK:
        idx = _SHARED.get(path)
        if idx is None:
            idx = _SHARED[path] = MathlibNames.from_tsv(path)
        return idx
