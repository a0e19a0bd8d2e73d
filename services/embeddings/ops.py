"""A deterministic feature-hashing text embedding ("toolproxy-hash-v1", 256 dimensions).

Why hashing and not a neural model: the project installs with pip alone, and every offline
sentence-embedding package needs torch or onnx runtimes plus model weights. Feature hashing
needs nothing, runs in microseconds, is identical on every machine and release, and still puts
texts that share words and word pieces close together (cosine similarity), which is what the
category-A `embeddings` tool promises. It captures no synonyms or meaning beyond spelling.

The recipe, stable across releases (changing it means a new model name):
1. Normalize: Unicode NFKC, then casefold ("lowercase" for every script).
2. Features: each word (a run of letters/digits, `\\w+`) as "w:<word>" with weight 1.0, and each
   character trigram of "<word>" (the word between angle brackets, so word starts and ends are
   features too) as "c:<trigram>" with weight 0.5. Repeated features add up.
3. Hash each feature's UTF-8 bytes with BLAKE2b (8-byte digest, person=b"toolproxy-hv1"), NOT
   Python's hash(), which is salted per process. Byte 0 is the bucket (0..255); the lowest bit
   of byte 1 is the sign (+1 when set, else -1), so colliding features tend to cancel out
   instead of piling up.
4. L2-normalize the 256 sums (a text without features gets all zeros) and round to 6 decimals.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from functools import lru_cache
from typing import Any

import regex

MODEL = "toolproxy-hash-v1"
DIMENSIONS = 256
WORD_WEIGHT = 1.0
TRIGRAM_WEIGHT = 0.5
MAX_TEXT_CHARS = 20_000
MAX_TEXTS = 32
MAX_TOTAL_CHARS = 100_000
_PERSON = b"toolproxy-hv1"
_WORD = regex.compile(r"\w+")


class EmbeddingError(ValueError):
    """Texts beyond the bounds of one request."""


@lru_cache(maxsize=65_536)
def _slot(feature: str) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=_PERSON).digest()
    return digest[0], (1.0 if digest[1] & 1 else -1.0)


def features(text: str) -> list[tuple[str, float]]:
    """The weighted features of a text, in order of appearance."""
    out: list[tuple[str, float]] = []
    for word in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()):
        out.append(("w:" + word, WORD_WEIGHT))
        marked = f"<{word}>"
        out.extend(("c:" + marked[i : i + 3], TRIGRAM_WEIGHT) for i in range(len(marked) - 2))
    return out


def embed(text: str) -> list[float]:
    vector = [0.0] * DIMENSIONS
    for feature, weight in features(text):
        bucket, sign = _slot(feature)
        vector[bucket] += sign * weight
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:
        return vector
    # `+ 0.0` turns a rounded -0.0 into 0.0 so equal vectors also serialize identically.
    return [round(v / norm, 6) + 0.0 for v in vector]


def embed_many(texts: list[str]) -> list[list[float]]:
    if not 1 <= len(texts) <= MAX_TEXTS:
        raise EmbeddingError(f"between 1 and {MAX_TEXTS} texts per request")
    if any(len(t) > MAX_TEXT_CHARS for t in texts):
        raise EmbeddingError(f"each text is limited to {MAX_TEXT_CHARS} characters")
    if sum(len(t) for t in texts) > MAX_TOTAL_CHARS:
        raise EmbeddingError(f"the texts are limited to {MAX_TOTAL_CHARS} characters in total")
    return [embed(t) for t in texts]


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def answer(args: dict[str, Any]) -> dict[str, Any]:
    """The tool's output for its (validated) arguments: what the service's worker process runs."""
    texts = [args["text"]] if "text" in args else args["texts"]
    return {"model": MODEL, "dimensions": DIMENSIONS, "embeddings": embed_many(texts)}
