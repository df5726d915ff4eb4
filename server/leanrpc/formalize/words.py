"""Words for retrieval: a Mathlib name's words and an informal statement's words, in one vocabulary.

`name_words` splits a declaration name (`Nat.Prime.two_le`, `IsNormalSubgroup`)
at dots, underscores and camel case; `module_words` does the same for a module
path less `Mathlib.`; `query_words` reads an informal statement: lower-cased
words, crude plural stripping (`stem`), stop words dropped, and a small table
from math English and LaTeX (`\\mathbb{R}`, "square root", ...) to Mathlib's
vocabulary. Split from retrieval.py (the indexes and their ranking): this room
only makes words, so both BM25s and the IDF source read the same ones.

May import: the standard library only.
"""

from __future__ import annotations

import functools
import re

_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_]+", re.U)
_WORD = re.compile(r"[A-Za-z]+")

# Informal/LaTeX words -> Mathlib name words.
_SYNONYMS = {
    "integer": ["int"],
    "integers": ["int"],
    "natural": ["nat"],
    "naturals": ["nat"],
    "rational": ["rat"],
    "rationals": ["rat"],
    "complex": ["complex"],
    "real": ["real"],
    "reals": ["real"],
    "divides": ["dvd"],
    "divisible": ["dvd"],
    "divisor": ["divisor", "dvd"],
    "divisors": ["divisors"],
    "gcd": ["gcd"],
    "lcm": ["lcm"],
    "greatest": ["gcd"],
    "modulo": ["mod", "modeq"],
    "congruent": ["modeq"],
    "remainder": ["mod"],
    "square": ["sq", "pow"],
    "root": ["sqrt", "root"],
    "sqrt": ["sqrt"],
    "logarithm": ["log"],
    "log": ["log"],
    "ln": ["log"],
    "exponential": ["exp"],
    "exp": ["exp"],
    "sum": ["sum"],
    "product": ["prod"],
    "prod": ["prod"],
    "absolute": ["abs"],
    "factorial": ["factorial"],
    "binomial": ["choose"],
    "choose": ["choose"],
    "derivative": ["deriv"],
    "differentiable": ["differentiable"],
    "integral": ["integral"],
    "continuous": ["continuous"],
    "limit": ["tendsto", "lim"],
    "converges": ["tendsto"],
    "sequence": ["seq", "tendsto"],
    "polynomial": ["polynomial"],
    "degree": ["degree"],
    "prime": ["prime"],
    "primes": ["prime"],
    "odd": ["odd"],
    "even": ["even"],
    "floor": ["floor"],
    "ceiling": ["ceil"],
    "sin": ["sin"],
    "cos": ["cos"],
    "tan": ["tan"],
    "pi": ["pi"],
    "group": ["group"],
    "subgroup": ["subgroup"],
    "normal": ["normal"],
    "abelian": ["comm"],
    "commutative": ["comm"],
    "ring": ["ring"],
    "field": ["field"],
    "ideal": ["ideal"],
    "matrix": ["matrix"],
    "determinant": ["det"],
    "vector": ["module"],
    "space": ["space"],
    "order": ["order", "orderof"],
    "finite": ["finite", "fintype"],
    "cardinality": ["card"],
    "set": ["set"],
    "mathbb": [],
    "frac": ["div"],
    "cdot": ["mul"],
    "le": ["le"],
    "leq": ["le"],
    "geq": ["le"],
    "lt": ["lt"],
    "infinitely": ["infinite"],
    "infinite": ["infinite"],
    "bijective": ["bijective"],
    "injective": ["injective"],
    "surjective": ["surjective"],
    "homomorphism": ["hom"],
    "isomorphic": ["equiv", "iso"],
    "compact": ["compact"],
    "open": ["open"],
    "closed": ["closed"],
    "metric": ["metric"],
    "norm": ["norm"],
    "inner": ["inner"],
}
_BLACKBOARD = {"R": "real", "Z": "int", "N": "nat", "Q": "rat", "C": "complex"}
_STOP = frozenset(
    "a an the of and or to in is are be for that this with as by on at it its if then there let show prove "
    "such all any each every some from we which what when where where find value values number numbers "
    "given suppose assume holds hold has have one two three x y z n m k b c d f g h".split()
)


def name_words(name: str) -> list[str]:
    """`Nat.Prime.two_le` -> ['nat', 'prime', 'two', 'le']; `IsNormalSubgroup` -> ['is', 'normal', 'subgroup']."""
    words = []
    for part in re.split(r"[._']", name):
        words.extend(w.lower() for w in _CAMEL.findall(part))
    return words


def stem(w: str) -> str:
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


def query_words(text: str) -> list[str]:
    words: list[str] = []
    for letter, word in _BLACKBOARD.items():
        if re.search(r"\\mathbb\{?" + letter, text):
            words.append(word)
    for raw in _WORD.findall(text):
        w = raw.lower()
        if w in _SYNONYMS:
            words.extend(_SYNONYMS[w])
            continue
        if w in _STOP or len(w) < 2:
            continue
        words.append(stem(w))
    return words


@functools.lru_cache(maxsize=4096)
def module_words(module: str) -> list[str]:
    parts = module.split(".")
    if parts and parts[0] == "Mathlib":
        parts = parts[1:]
    return name_words(".".join(parts))
