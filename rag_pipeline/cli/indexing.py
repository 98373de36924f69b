"""The commands on the index: index, sources, status, archive / reject / activate, check,
export, workspace."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rag_pipeline.cli.common import UserError, settings_of


def index_command(args: argparse.Namespace) -> int:
    from rag_pipeline.defs.errors import NoDaemon, RunsInProgress
    from rag_pipeline.embedding.image import ImageModelError
    from rag_pipeline.orchestration.incremental import index_once

    settings = settings_of(args)
    if args.source:
        _require_folders(args.source)
        settings = settings.add_sources(args.source)
    elif not settings.sources:
        (settings.home / "inbox").mkdir(parents=True, exist_ok=True)
    if args.parallel is not None:
        if args.parallel < 1:
            raise UserError("--parallel needs at least 1 run at a time")
        dagster = settings.dagster.model_copy(update={"max_concurrent_runs": args.parallel})
        settings = settings.model_copy(update={"dagster": dagster})
    try:
        outcome = index_once(
            settings,
            retry_failed=args.retry_failed,
            verbose=args.verbose,
            parallel=args.parallel,
        )
    except ImageModelError as error:  # e.g. CLIP configured without the image extra
        raise UserError(str(error)) from error
    except RunsInProgress as error:
        raise UserError(
            f"{error}: nothing is planned while a run of the workspace is queued or in "
            "progress (their documents may be among the changes); try again when they end "
            "(queued runs start while a dagster-daemon runs, e.g. under `rag-pipeline ui`, "
            "where they can also be cancelled)"
        ) from error
    except NoDaemon as error:
        raise UserError(
            f"{error}: start one (`dagster-daemon run`, or `rag-pipeline ui`) or index without "
            "--parallel; the queued runs start once a daemon runs"
        ) from error
    diff = outcome.diff
    if not outcome.succeeded:
        print(
            f"the run failed after {outcome.seconds:.1f} s (see the error above); what it "
            f"committed stays, the rest of the {len(diff.to_process)} documents is retried "
            "by the next run"
        )
        return 1
    print(
        f"added {len(diff.new)}, changed {len(diff.changed)}, "
        f"unchanged {len(diff.unchanged) + diff.also_unchanged}, "
        f"deleted {len(diff.deleted)}, failed {len(outcome.failed)} in {outcome.seconds:.1f} s"
    )
    for doc_id, reason in outcome.failed.items():
        print(f"  failed: {doc_id}: {reason}")
    return 0


def _require_folders(folders: list[Path]) -> None:
    missing = [folder for folder in folders if not folder.is_dir()]
    if missing:
        raise UserError("not a folder: " + ", ".join(str(folder) for folder in missing))


def sources_command(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    if args.action != "list" and not args.folders:
        raise UserError(f"sources {args.action} needs at least one folder")
    if args.action == "add":
        _require_folders(args.folders)
        settings = settings.add_sources(args.folders)
    elif args.action == "remove":
        unknown = [f for f in args.folders if f.expanduser().resolve() not in settings.sources]
        if unknown:
            raise UserError("not a watched folder: " + ", ".join(str(f) for f in unknown))
        settings = settings.remove_sources(args.folders)
        print("their documents leave the index at the next `rag-pipeline index`")
    for folder in settings.watched_folders:
        state = "" if folder.is_dir() else "  (missing: its documents are kept)"
        print(f"{folder}{state}")
    return 0


# Past this many documents, `status` lists only those needing a look (a screen's worth).
_STATUS_LISTED = 50


def status_command(args: argparse.Namespace) -> int:
    from rag_pipeline.availability import availability_by_document
    from rag_pipeline.catalog import Catalog

    settings = settings_of(args)
    with Catalog(settings) as catalog:
        collections = catalog.collections()
        live = next((c for c in collections if c.state == "live"), None)
        building = next((c for c in collections if c.state == "building"), None)
        counts = catalog.document_counts(live.name) if live else {}
        availability = availability_by_document(catalog)
        every = args.json or args.all or sum(counts.values()) <= _STATUS_LISTED
        if not live:
            records = {}
        elif every:
            records = catalog.documents(live.name)
        else:  # the failed, the ones to index again, and those taken out of search
            records = catalog.unsettled_documents(live.name) | catalog.documents(
                live.name, availability
            )
        built = catalog.document_counts(building.name) if building else {}
    rows = [
        {
            "doc_id": record.doc_id,
            "state": record.state,
            "availability": availability.get(record.doc_id),
            "chunks": record.chunks,
            "version": record.version,
            "indexed_version": record.indexed_version,
            "error": record.error,
            "retry_at": record.retry_at,
            "reindex_reason": record.reindex_reason,
            "file_path": str(record.file_path),
        }
        for _, record in sorted(records.items())
    ]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return 0
    if not counts:
        print(f"nothing indexed yet under {settings.home}: run `rag-pipeline index`")
        return 0
    width = max((len(row["doc_id"]) for row in rows), default=0)
    for row in rows:
        detail = f"{row['chunks']} chunks" if row["state"] == "indexed" else row["error"]
        if row["state"] == "failed" and row["indexed_version"]:
            detail += f" (version {row['indexed_version']} is still searchable)"
        if row["reindex_reason"]:
            detail += f" (to be indexed again: {row['reindex_reason']})"
        if row["availability"]:
            detail += f" [{row['availability']}]"
        print(f"{row['doc_id']:<{width}}  {row['state']:<7}  {row['version']}  {detail}")
    total = sum(counts.values())
    indexed = counts.get("indexed", 0)
    print(f"{indexed} indexed, {total - indexed} failed")
    if not every:
        print(f"(only the {len(rows)} needing a look are listed: `status --all` lists all {total})")
    if building:
        print(
            f"a collection for new models is being built ({built.get('indexed', 0)} of {total} "
            "documents so far); searches use the current one until it is complete"
        )
    return 0


def availability_command(args: argparse.Namespace) -> int:
    import getpass

    from rag_pipeline.availability import AvailabilityError, set_availability
    from rag_pipeline.defs.observations import observe_availability

    settings = settings_of(args)
    try:
        record = set_availability(
            settings,
            args.doc_id,
            args.state,
            getpass.getuser(),
            args.chunk,
            observe=observe_availability,
        )
    except AvailabilityError as error:
        raise UserError(str(error)) from error
    what = args.doc_id if args.chunk is None else f"chunk {args.chunk} of {args.doc_id}"
    print(f"{what}: {record.state} ({'searchable' if not record.offline else 'out of search'})")
    return 0


def check_command(args: argparse.Namespace) -> int:
    from rag_pipeline.indexing.checks import audit

    outcome = audit(settings_of(args), every_point=args.full)
    for problem in outcome.problems:
        print(problem)
    if outcome.problems:
        print(f"{len(outcome.problems)} problems: `rag-pipeline index` repairs them")
    elif outcome.every_point_read:
        print("the store and the catalog agree, point by point")
    else:
        print(
            "the store and the catalog agree: as many points as indexed chunks, each chunk of "
            "its document's live version (`check --full` compares every point)"
        )
    return 1 if outcome.problems else 0


def export_command(args: argparse.Namespace) -> int:
    from rag_pipeline.catalog import Catalog
    from rag_pipeline.catalog.export import export_catalog

    settings = settings_of(args)
    folder = args.to or settings.home / "export"
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        if live is None:
            raise UserError(f"nothing indexed yet under {settings.home}: run `rag-pipeline index`")
        for path in export_catalog(catalog, live.name, folder):
            print(path)
    return 0


def workspace_command(args: argparse.Namespace) -> int:
    from rag_pipeline.locking import LockTimeout
    from rag_pipeline.workspaces import (
        WorkspaceError,
        create_workspace,
        delete_workspace,
        find_workspace,
        list_workspaces,
        rename_workspace,
    )

    settings = settings_of(args)
    if args.action != "list" and not args.name:
        raise UserError(f"workspace {args.action} needs a name")
    try:
        if args.action == "create":
            created = create_workspace(settings, args.name)
            print(
                f"created {created.name!r} (id {created.id}): add folders with `rag-pipeline "
                f"sources add DIR --workspace {created.id}` or upload on the page"
            )
            return 0
        if args.action == "rename":
            if not args.new_name:
                raise UserError("workspace rename needs the new name")
            renamed = rename_workspace(find_workspace(settings, args.name), args.new_name)
            print(f"renamed to {renamed.name!r} (id {renamed.id})")
            return 0
        if args.action == "delete":
            doomed = find_workspace(settings, args.name)
            if not args.yes:
                raise UserError(
                    f"this deletes {doomed.name!r} ({doomed.home}): its index, uploads and "
                    "conversations; add --yes to go on"
                )
            delete_workspace(doomed)
            print(f"deleted {doomed.name!r}")
            return 0
    except WorkspaceError as error:
        raise UserError(str(error)) from error
    except LockTimeout as error:
        raise UserError("the workspace is being indexed; try again when the run ends") from error
    for listed in list_workspaces(settings):
        folders = ", ".join(str(folder) for folder in listed.settings.watched_folders)
        print(f"{listed.id:<20}  {listed.name}  ({folders})")
    return 0
