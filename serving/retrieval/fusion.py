"""The dense, sparse and image rankings fused into one."""

from __future__ import annotations

import statistics

from rag_pipeline.config import RetrievalSettings
from rag_pipeline.store import Hit, NearestHits
from serving.retrieval.candidates import Candidate

# The rankings fusion merges: NearestHits fields.
_RANKINGS = ("dense", "sparse", "image", "multilingual")


def fuse(
    nearest: NearestHits, settings: RetrievalSettings, *, understood: bool = True
) -> list[Candidate]:
    """Merge the dense, sparse, image and multilingual rankings into one, best first.

    Each counts its ``RetrievalSettings`` weight, the multilingual model's the dense weight;
    but for a question in a language the dense model does not understand (not
    ``understood``), its ranking counts ``foreign_dense_weight`` (close to random), and for one
    it understands, the multilingual ranking (of passages in other languages, reached by
    meaning alone, never by their words) counts half: a question is likelier about passages in
    its own language.
    """
    rankings: dict[str, list[Hit]] = {kind: getattr(nearest, kind) for kind in _RANKINGS}
    weights = {
        "dense": settings.dense_weight if understood else settings.foreign_dense_weight,
        "sparse": settings.sparse_weight,
        "image": settings.image_weight,
        "multilingual": settings.dense_weight if not understood else settings.dense_weight / 2,
    }
    candidates: dict[str, Candidate] = {}
    # A ranking weighted 0 brings no candidates of its own; its ranks are kept for traces.
    for kind in sorted(rankings, key=lambda kind: weights[kind] == 0):
        hits = rankings[kind]
        contribution = _contributions(hits, settings)
        for rank, hit in enumerate(hits, 1):
            if weights[kind] == 0 and hit.point_id not in candidates:
                continue
            candidate = candidates.setdefault(hit.point_id, Candidate(hit.point_id, hit.payload))
            setattr(candidate, f"{kind}_rank", rank)
            setattr(candidate, f"{kind}_score", hit.score)
            candidate.fused_score += weights[kind] * contribution[hit.point_id]
    # Equal fused scores (DBSF clips the best to 1.0; a weight of 0 zeroes a ranking): first
    # what more weighted rankings found, then the order of the ranking that weighs more.
    unranked = 1 << 30
    order = sorted(_RANKINGS, key=lambda kind: -weights[kind])

    def evidence(candidate: Candidate) -> int:
        return sum(1 for kind in order if weights[kind] and getattr(candidate, f"{kind}_rank"))

    return sorted(
        candidates.values(),
        key=lambda c: (
            -c.fused_score,
            -evidence(c),
            *(getattr(c, f"{kind}_rank") or unranked for kind in order),
        ),
    )


def _contributions(hits: list[Hit], settings: RetrievalSettings) -> dict[str, float]:
    """Each hit's share of the fused score, from its rank or its normalised score."""
    if settings.fusion == "rrf":
        return {hit.point_id: 1.0 / (settings.rrf_k + rank) for rank, hit in enumerate(hits, 1)}
    scores = [hit.score for hit in hits]
    if not scores:
        return {}
    if settings.fusion == "minmax":
        low, high = min(scores), max(scores)
    else:  # dbsf as Qdrant computes it: mean ± 3 sample standard deviations span [0, 1]
        mean = statistics.fmean(scores)
        spread = statistics.stdev(scores) if len(scores) > 1 else 0.0
        low, high = mean - 3 * spread, mean + 3 * spread
    width = high - low
    # A ranking of one hit, or of equal scores, has no spread to normalise by: each of its hits
    # is as good as its best. (Qdrant's DBSF gives them 0.5, so that an identifier found in one
    # chunk alone lost to the dense ranking's top, whatever the keywords said.)
    return {
        hit.point_id: 1.0 if width <= 0 else min(max((hit.score - low) / width, 0.0), 1.0)
        for hit in hits
    }
