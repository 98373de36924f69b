"""The commands that ask the index: query, eval."""

from __future__ import annotations

import argparse
import json

from rag_pipeline.cli.common import UserError, settings_of


def query_command(args: argparse.Namespace) -> int:
    from rag_pipeline.store import StoreError
    from serving.rerank import RerankError
    from serving.retrieval import QueryError, search

    settings = settings_of(args)
    try:
        retrieval = search(settings, args.text, top_k=args.top_k)
    except (QueryError, StoreError, RerankError) as error:
        raise UserError(str(error)) from error
    hits = [passage.as_hit() for passage in retrieval.passages]
    if args.json:
        print(json.dumps(hits, ensure_ascii=False, indent=2))
        return 0
    if not hits:
        print("no results")
    pages_shown: set[tuple[str, int]] = set()
    for rank, hit in enumerate(hits, 1):
        where = f"p. {hit['page']}" if hit["page"] else ""
        # the first passages show one a page (retrieval.page_passages): a page's next one comes
        # after the other pages, whatever its score
        page = (hit["doc_id"], hit["page"])
        again = f"  (another passage of {where} above)" if page in pages_shown else ""
        if hit["page"]:
            pages_shown.add(page)
        print(f"{rank}. {hit['score']:.3f}  {hit['doc_id']}  {where}  {hit['section']}{again}")
        print("   " + " ".join(hit["text"].split())[:300])
    return 0


def eval_command(args: argparse.Namespace) -> int:
    from evaluation import beir, pages
    from evaluation.harness import DatasetError
    from rag_pipeline.store import StoreError
    from serving.rerank import RerankError
    from serving.retrieval import QueryError

    settings = settings_of(args)
    if not args.dataset.is_dir():
        raise UserError(f"not a folder: {args.dataset}")
    try:
        if pages.is_page_dataset(args.dataset):
            if args.split != "test":
                raise UserError("--split is for BEIR datasets; a PDF question set has none")
            page_report = pages.run_page_evaluation(settings, args.dataset)
            as_json, table = page_report.as_json(), pages.format_page_report(page_report)
        else:
            report = beir.run_evaluation(settings, args.dataset, args.split)
            as_json, table = report.as_json(), beir.format_report(report)
    except (DatasetError, StoreError, RerankError, QueryError) as error:
        raise UserError(str(error)) from error
    print(json.dumps(as_json, indent=2) if args.json else table)
    return 0
