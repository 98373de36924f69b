"""What a page evaluation found, as JSON and as the table ``rag-pipeline eval`` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evaluation.harness import format_latency
from evaluation.metrics import PAGE_METRICS, PASSAGE_METRICS
from evaluation.pages.baselines import BASELINES

METRIC = "passage-hit@5"  # what the configured method is judged by


def strongest_baseline(methods: dict[str, dict[str, float]]) -> str:
    """The naive page line with the highest passage-hit@5 among ``methods``' scores (the first
    in ``BASELINES``' order on a tie): the line to beat, which depends on the documents."""
    return max(BASELINES, key=lambda baseline: methods[baseline][METRIC])


def over(ours: float, theirs: float) -> str:
    """``ours`` as a multiple of ``theirs``, for a table ("n/a" when they found nothing)."""
    return f"{ours / theirs:.2f} ×" if theirs else "n/a"


@dataclass
class PageReport:
    dataset: str
    documents: int  # PDFs in the dataset
    pages: int  # their pages with text: the baseline's units
    chunks: int
    index_seconds: float
    baseline_seconds: float  # reading, embedding (or finding in the cache) the pages
    methods: dict[str, dict[str, float]]  # method → metrics
    configured: str  # the method the chat page uses
    sides: tuple[str, str]  # the configured hybrid's two sides alone: dense, keywords
    groups: dict[str, dict[str, dict[str, float]]]  # group (question_groups) → method → metrics
    latency_ms: dict[str, float] = field(default_factory=dict)
    not_indexed: dict[str, str] = field(default_factory=dict)  # document → why

    @property
    def reference(self) -> str:
        """The strongest naive page line over all the questions."""
        return strongest_baseline(self.methods)

    @property
    def ratio(self) -> float | None:
        """The configured method's passage-hit@5 over the strongest naive line's (None if 0)."""
        reference = self.methods[self.reference][METRIC]
        if not reference:
            return None
        return self.methods[self.configured][METRIC] / reference

    def as_json(self) -> dict[str, Any]:
        """One object keyed by method; ``run`` holds what the methods share."""
        ratio = self.ratio
        run = {
            "dataset": self.dataset,
            "documents": self.documents,
            "pages": self.pages,
            "chunks": self.chunks,
            "index_seconds": round(self.index_seconds, 1),
            "baseline_seconds": round(self.baseline_seconds, 1),
            "configured_method": self.configured,
            "baselines": list(BASELINES),
            "reference_baseline": self.reference,
            "passage_hit@5_over_reference": None if ratio is None else round(ratio, 4),
            "sides": list(self.sides),
            "groups": self.groups,
            "group_reference_baselines": {
                group: strongest_baseline(by_method) for group, by_method in self.groups.items()
            },
            "query_latency_ms": self.latency_ms,
            "not_indexed": self.not_indexed,
        }
        return {**self.methods, "run": run}


def format_page_report(report: PageReport) -> str:
    questions = next(iter(report.methods.values()))["queries"]
    metrics = PASSAGE_METRICS + PAGE_METRICS
    headers = ["p-hit@1", "p-hit@5", "p-hit@10", "page@1", "page@5", "page@10", "doc@5", "MRR@10"]
    lines = [
        f"{report.dataset}: {report.documents} PDFs, {report.pages} pages with text, "
        f"{report.chunks} chunks, indexed in {report.index_seconds:.1f} s; {questions} "
        f"questions; page baselines ready in {report.baseline_seconds:.1f} s",
        "p-hit@k: an evidence page among the pages of the first k passages (what the answerer "
        "reads); page@k: among the first k pages, each ranked by its first passage",
        f"{'method':<30}" + "".join(f"{header:>9}" for header in headers),
    ]
    reference = report.reference
    marks = {
        report.configured: "  ← the chat page's",
        reference: "  ← the strongest naive line",
    }
    for method, values in report.methods.items():
        name = f"{method} (baseline)" if method in BASELINES else method
        lines.append(
            f"{name:<30}"
            + "".join(f"{values[metric]:>9.4f}" for metric in metrics)
            + marks.get(method, "")
        )
    lines.append(
        f"passage-hit@5 of the configured method ({report.configured}) against the strongest "
        "naive page line of the set or group, and against each of its own sides alone:"
    )
    for group, by_method in {"all": report.methods, **report.groups}.items():
        strongest = strongest_baseline(by_method)
        ours = by_method[report.configured][METRIC]
        sides = "; ".join(
            f"{side} alone {by_method[side][METRIC]:.4f} ({over(ours, by_method[side][METRIC])})"
            for side in report.sides
        )
        theirs = by_method[strongest][METRIC]
        lines.append(
            f"  {group:<10} ({by_method[strongest]['queries']:>3}): {ours:.4f} = "
            f"{over(ours, theirs)} {strongest} ({theirs:.4f}); {sides}"
        )
    for doc_id, reason in report.not_indexed.items():
        lines.append(f"not indexed (its pages are never found): {doc_id}: {reason}")
    lines.append(format_latency(report.latency_ms))
    return "\n".join(lines)
