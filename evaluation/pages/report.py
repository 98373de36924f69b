"""What a page evaluation found, as JSON and as the table ``rag-pipeline eval`` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evaluation.harness import format_latency
from evaluation.metrics import PAGE_METRICS, PASSAGE_METRICS
from evaluation.pages.baselines import BASELINES, REFERENCE


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
    groups: dict[str, dict[str, dict[str, float]]]  # group (question_groups) → method → metrics
    latency_ms: dict[str, float] = field(default_factory=dict)
    not_indexed: dict[str, str] = field(default_factory=dict)  # document → why

    @property
    def ratio(self) -> float | None:
        """The configured method's passage-hit@5 over the reference baseline's (None if 0)."""
        reference = self.methods[REFERENCE]["passage-hit@5"]
        if not reference:
            return None
        return self.methods[self.configured]["passage-hit@5"] / reference

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
            "reference_baseline": REFERENCE,
            "passage_hit@5_over_reference": None if ratio is None else round(ratio, 4),
            "groups": self.groups,
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
    marks = {report.configured: "  ← the chat page's", REFERENCE: "  ← the reference"}
    for method, values in report.methods.items():
        name = f"{method} (baseline)" if method in BASELINES else method
        lines.append(
            f"{name:<30}"
            + "".join(f"{values[metric]:>9.4f}" for metric in metrics)
            + marks.get(method, "")
        )
    ratio = report.ratio
    configured = report.methods[report.configured]["passage-hit@5"]
    reference = report.methods[REFERENCE]["passage-hit@5"]
    times = "n/a (the baseline found nothing)" if ratio is None else f"{ratio:.2f}"
    lines.append(
        f"configured method ({report.configured}) passage-hit@5 = {configured:.4f}, = {times} × "
        f"the reference ({REFERENCE} passage-hit@5 = {reference:.4f})"
    )
    lines.append("passage-hit@5 by group (questions):")
    for group, by_method in report.groups.items():
        count = by_method[REFERENCE]["queries"]
        ours, theirs = (
            by_method[method]["passage-hit@5"] for method in (report.configured, REFERENCE)
        )
        lines.append(f"  {group:<10} ({count:>3}): {ours:.4f} against {theirs:.4f} ({REFERENCE})")
    for doc_id, reason in report.not_indexed.items():
        lines.append(f"not indexed (its pages are never found): {doc_id}: {reason}")
    lines.append(format_latency(report.latency_ms))
    return "\n".join(lines)
