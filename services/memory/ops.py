"""Deterministic extractive summary: the sentences whose content words are most frequent."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import regex

MAX_TEXT_CHARS = 100_000
MAX_SENTENCES = 20
DEFAULT_SENTENCES = 3

_PARAGRAPH = regex.compile(r"\n[^\S\n]*\n\s*")
# A sentence ends with . ! ? or … (possibly repeated), then closing quotes or brackets, then
# whitespace or the end of the paragraph.
_END = regex.compile(r"[.!?…]+[\"'”’)\]]*(?=\s|$)")
_WORD = regex.compile(r"\w+")
_LAST_WORD = regex.compile(r"([\w.]+)$")
_WINDOW = 32
# Periods after these do not end a sentence ("Dr. Smith", "e.g. this").
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e inc ltd co corp fig no approx dept est "
    "jan feb mar apr jun jul aug sep sept oct nov dec mt u.s u.k a.m p.m".split()
)
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each few
    for from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just let me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up upon
    us very was we were what when where which while who whom why will with would you your yours
    yourself yourselves one two may might must shall many much get got well even""".split()
)


class SummaryError(ValueError):
    """A summary request that cannot be served (bad bounds)."""


@dataclass(frozen=True, slots=True)
class Summary:
    sentences: list[str]  # the chosen sentences, in their original order
    sentence_count: int  # sentences found in the whole text

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


def split_sentences(text: str) -> list[str]:
    """Sentences with whitespace collapsed; blank lines always end a sentence."""
    sentences: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        start = 0
        for m in _END.finditer(paragraph):
            if _continues(paragraph, m.start(), m.end(), m.group()):
                continue
            sentences.append(paragraph[start : m.end()])
            start = m.end()
        sentences.append(paragraph[start:])
    return [s for s in (" ".join(raw.split()) for raw in sentences) if s]


def _continues(paragraph: str, start: int, end: int, mark: str) -> bool:
    """True when the punctuation at [start, end) does not end the sentence.

    Looks only near the mark (never copies or rescans the paragraph), so splitting stays
    linear in the text's length: 100,000 characters take milliseconds, not seconds."""
    i, n = end, len(paragraph)
    while i < n and paragraph[i].isspace():
        i += 1
    following = paragraph[i : i + 1]
    if following and following.islower():
        return True
    if mark.startswith(".") and len(mark.rstrip("\"'”’)]")) == 1:
        # The word before the mark, seen through a window longer than any abbreviation: a
        # longer word shows as its last _WINDOW characters, which is no abbreviation either.
        previous = _LAST_WORD.search(paragraph, max(0, start - _WINDOW), start)
        if previous is not None:
            word = previous.group(1).lower()
            return word in ABBREVIATIONS or (len(word) == 1 and word.isalpha())
    return False


def content_words(sentence: str) -> list[str]:
    words = (w.casefold() for w in _WORD.findall(sentence))
    return [w for w in words if len(w) > 1 and not w.isdigit() and w not in STOPWORDS]


def summarize(text: str, max_sentences: int = DEFAULT_SENTENCES) -> Summary:
    """Score each sentence by the normalized frequency (count / highest count) of its content
    words, summed and divided by sqrt(content words) so neither long nor one-word sentences win
    by length alone; keep the top `max_sentences` (ties: the earlier), in original order."""
    if not 1 <= max_sentences <= MAX_SENTENCES:
        raise SummaryError(f"max_sentences must be between 1 and {MAX_SENTENCES}")
    if len(text) > MAX_TEXT_CHARS:
        raise SummaryError(f"the text is longer than {MAX_TEXT_CHARS} characters")
    sentences = split_sentences(text)
    words = [content_words(s) for s in sentences]
    counts = Counter(w for ws in words for w in ws)
    top = max(counts.values(), default=1)
    scores = [sum(counts[w] for w in ws) / top / math.sqrt(len(ws)) if ws else 0.0 for ws in words]
    ranked = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))[:max_sentences]
    return Summary([sentences[i] for i in sorted(ranked)], len(sentences))


def answer(args: dict[str, Any]) -> dict[str, Any]:
    """The tool's output for its (validated) arguments: what the service's worker process runs."""
    summary = summarize(args["text"], args.get("max_sentences", DEFAULT_SENTENCES))
    return {
        "summary": summary.text,
        "sentences": summary.sentences,
        "sentence_count": summary.sentence_count,
    }
