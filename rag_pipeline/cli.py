"""``rag-pipeline``: index the watched folders, show their state, query them, serve the page, manage
workspaces and users, open Dagster's UI."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from rag_pipeline.config import Settings, load_settings

# unstructured, Hugging Face libraries and Gradio phone home unless told not to.
for _name, _value in (
    ("DO_NOT_TRACK", "1"),
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("GRADIO_ANALYTICS_ENABLED", "False"),
):
    os.environ.setdefault(_name, _value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    try:
        return args.command(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`rag-pipeline query … | head`)
        sys.stderr.close()
        return 0
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


class UserError(Exception):
    """A problem the user can fix; printed without a traceback."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rag-pipeline", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(
        name: str, function: object, help_text: str, *, per_workspace: bool = True
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument(
            "--home",
            type=Path,
            help="folder for all state (default: $RAG_PIPELINE_HOME or ./data)",
        )
        if per_workspace:
            sub.add_argument(
                "--workspace",
                metavar="NAME",
                help="the workspace, by name or id (default: the default workspace)",
            )
        sub.add_argument("-v", "--verbose", action="store_true", help="show Dagster's own log")
        sub.set_defaults(command=function)
        return sub

    index = command("index", _index, "Index the watched folders once, incrementally.")
    command(
        "watch",
        _watch,
        "Index every workspace's changes as they happen (file-system events, settled for "
        "indexing.watch_settle_ms), until Ctrl-C or SIGTERM.",
        per_workspace=False,
    )
    index.add_argument(
        "--source",
        action="append",
        type=Path,
        metavar="DIR",
        help="a folder to watch as well (repeatable); remembered for later runs "
        "(default: the remembered folders, or <home>/inbox)",
    )
    index.add_argument("--retry-failed", action="store_true", help="retry documents that failed")
    index.add_argument(
        "--parallel",
        type=int,
        metavar="N",
        help="queue the changes as Dagster runs of indexing.run_documents documents, N at a "
        "time, each in its own process, and wait for them (a dagster-daemon runs the queue: "
        "the running one, else one started for the command); default: one run in this process",
    )

    status = command("status", _status, "Show every document's state.")
    status.add_argument("--json", action="store_true", help="print JSON")

    for state, verb, text in (
        ("archived", "archive", "Take a document (or one chunk) out of search, as outdated."),
        ("rejected", "reject", "Take a document (or one chunk) out of search, as wrong."),
        ("active", "activate", "Put an archived or rejected document (or chunk) back."),
    ):
        governed = command(verb, _availability, f"{text} At once; kept across re-indexing.")
        governed.add_argument("doc_id", metavar="DOC_ID", help="as `status` lists it")
        governed.add_argument(
            "--chunk", type=int, metavar="N", help="only the chunk at this index (`query --json`)"
        )
        governed.set_defaults(state=state)

    sources = command("sources", _sources, "List, add or remove watched folders.")
    sources.add_argument("action", choices=["list", "add", "remove"], nargs="?", default="list")
    sources.add_argument("folders", nargs="*", type=Path, metavar="DIR")

    command(
        "check",
        _check,
        "Compare every point in the vector store with the catalog (slow on a large index); "
        "exit 1 when they disagree.",
    )

    export = command(
        "export", _export, "Write the catalog as Parquet (documents, chunks) for DuckDB & co."
    )
    export.add_argument("--to", type=Path, metavar="DIR", help="default: <home>/export")

    query = command("query", _query, "Search the index (hybrid dense + sparse).")
    query.add_argument("text", help="what to search for")
    query.add_argument("--top-k", type=int, help="number of hits (default: retrieval.top_k, 8)")
    query.add_argument("--json", action="store_true", help="print JSON")

    evaluation = command(
        "eval",
        _eval,
        "Measure retrieval quality on a dataset indexed through the real pipeline into "
        "<home>/eval/<dataset>: a PDF question set (questions.jsonl and pdfs/: pages with "
        "the evidence found, against a page-unit baseline) or a BEIR-layout one "
        "(corpus.jsonl, queries.jsonl, qrels/).",
    )
    evaluation.add_argument("dataset", type=Path, metavar="DATASET_DIR")
    evaluation.add_argument(
        "--split", default="test", help="BEIR: qrels/<split>.tsv (default test)"
    )
    evaluation.add_argument("--json", action="store_true", help="print JSON keyed by method")

    workspace = command(
        "workspace",
        _workspace,
        "List, create, rename or delete workspaces (deleting drops the workspace's index, "
        "uploads and conversations; its watched folders stay).",
        per_workspace=False,
    )
    workspace.add_argument(
        "action", choices=["list", "create", "rename", "delete"], nargs="?", default="list"
    )
    workspace.add_argument("name", nargs="?", metavar="NAME", help="its name or id")
    workspace.add_argument("new_name", nargs="?", metavar="NEW_NAME", help="rename: the new name")
    workspace.add_argument("--yes", action="store_true", help="delete without asking")

    user = command(
        "user",
        _user,
        "List, add (or replace) and remove the users of the page and the search API.",
        per_workspace=False,
    )
    user.add_argument("action", choices=["list", "add", "remove"], nargs="?", default="list")
    user.add_argument("name", nargs="?", metavar="NAME")
    user.add_argument(
        "--workspace",
        dest="grants",
        action="append",
        default=[],
        metavar="NAME",
        help="add: a workspace the user may use (repeatable; '*': all)",
    )
    user.add_argument(
        "--govern",
        action="append",
        default=[],
        metavar="NAME",
        help="add: a workspace where the user may archive, reject and activate documents "
        "and passages on the page (repeatable; '*': all)",
    )
    passwords = user.add_mutually_exclusive_group()
    passwords.add_argument(
        "--password-stdin", action="store_true", help="add: read the password from stdin"
    )
    passwords.add_argument(
        "--no-password",
        action="store_true",
        help="add: no password (signs in through the reverse proxy or the token only)",
    )

    serve = command(
        "serve",
        _serve,
        "Serve the chat page and the search API on every workspace of this home.",
        per_workspace=False,
    )
    serve.add_argument("--port", type=int, help="default: serving.port (7860)")
    serve.add_argument("--host", help="default: serving.host (127.0.0.1)")

    ui = command(
        "ui", _ui, "Open the Dagster UI on this home folder (dagster dev).", per_workspace=False
    )
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--host", default="127.0.0.1")
    return parser


def _configure_logging(verbose: bool) -> None:
    pipeline_logger = logging.getLogger("rag_pipeline")
    if not any(
        getattr(handler, "_rag_pipeline_cli", False) for handler in pipeline_logger.handlers
    ):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler._rag_pipeline_cli = True  # type: ignore[attr-defined]
        pipeline_logger.addHandler(handler)
    pipeline_logger.setLevel(logging.INFO)
    if not verbose:
        for noisy in ("dagster", "jieba"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def _settings(args: argparse.Namespace) -> Settings:
    """The settings of the workspace the command names (``--workspace``), else the default's."""
    from rag_pipeline.workspaces import WorkspaceError, find_workspace

    try:
        settings = load_settings(args.home)
    except ValueError as error:  # pydantic's ValidationError is one
        raise UserError(f"invalid configuration: {error}") from error
    if not getattr(args, "workspace", None):
        return settings
    try:
        return find_workspace(settings, args.workspace).settings
    except WorkspaceError as error:
        raise UserError(str(error)) from error
    except ValueError as error:
        raise UserError(f"invalid configuration: {error}") from error


def _workspace(args: argparse.Namespace) -> int:
    from rag_pipeline.locking import LockTimeout
    from rag_pipeline.workspaces import (
        WorkspaceError,
        create_workspace,
        delete_workspace,
        find_workspace,
        list_workspaces,
        rename_workspace,
    )

    settings = _settings(args)
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


def _index(args: argparse.Namespace) -> int:
    from rag_pipeline.defs.errors import NoDaemon, RunsInProgress
    from rag_pipeline.embedding.image import ImageModelError
    from rag_pipeline.orchestration.incremental import index_once

    settings = _settings(args)
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
        f"added {len(diff.new)}, changed {len(diff.changed)}, unchanged {len(diff.unchanged)}, "
        f"deleted {len(diff.deleted)}, failed {len(outcome.failed)} in {outcome.seconds:.1f} s"
    )
    for doc_id, reason in outcome.failed.items():
        print(f"  failed: {doc_id}: {reason}")
    return 0


def _require_folders(folders: list[Path]) -> None:
    missing = [folder for folder in folders if not folder.is_dir()]
    if missing:
        raise UserError("not a folder: " + ", ".join(str(folder) for folder in missing))


def _sources(args: argparse.Namespace) -> int:
    settings = _settings(args)
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


def _status(args: argparse.Namespace) -> int:
    from rag_pipeline.availability import availability_by_document
    from rag_pipeline.catalog import Catalog

    settings = _settings(args)
    with Catalog(settings) as catalog:
        collections = catalog.collections()
        live = next((c for c in collections if c.state == "live"), None)
        building = next((c for c in collections if c.state == "building"), None)
        records = list(catalog.documents(live.name).values()) if live else []
        built = catalog.documents(building.name) if building else {}
        availability = availability_by_document(catalog)
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
        for record in records
    ]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return 0
    if not rows:
        print(f"nothing indexed yet under {settings.home}: run `rag-pipeline index`")
        return 0
    width = max(len(row["doc_id"]) for row in rows)
    for row in rows:
        detail = f"{row['chunks']} chunks" if row["state"] == "indexed" else row["error"]
        if row["state"] == "failed" and row["indexed_version"]:
            detail += f" (version {row['indexed_version']} is still searchable)"
        if row["reindex_reason"]:
            detail += f" (to be indexed again: {row['reindex_reason']})"
        if row["availability"]:
            detail += f" [{row['availability']}]"
        print(f"{row['doc_id']:<{width}}  {row['state']:<7}  {row['version']}  {detail}")
    indexed = sum(row["state"] == "indexed" for row in rows)
    print(f"{indexed} indexed, {len(rows) - indexed} failed")
    if building:
        done = sum(1 for record in built.values() if record.state == "indexed")
        print(
            f"a collection for new models is being built ({done} of {len(rows)} documents so "
            "far); searches use the current one until it is complete"
        )
    return 0


def _availability(args: argparse.Namespace) -> int:
    import getpass

    from rag_pipeline.availability import AvailabilityError, set_availability
    from rag_pipeline.defs.observations import observe_availability

    settings = _settings(args)
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


def _check(args: argparse.Namespace) -> int:
    from rag_pipeline.indexing.checks import audit

    problems = audit(_settings(args))
    for problem in problems:
        print(problem)
    print(
        f"{len(problems)} problems: `rag-pipeline index` repairs them"
        if problems
        else "the store and the catalog agree"
    )
    return 1 if problems else 0


def _export(args: argparse.Namespace) -> int:
    from rag_pipeline.catalog import Catalog
    from rag_pipeline.catalog.export import export_catalog

    settings = _settings(args)
    folder = args.to or settings.home / "export"
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        if live is None:
            raise UserError(f"nothing indexed yet under {settings.home}: run `rag-pipeline index`")
        for path in export_catalog(catalog, live.name, folder):
            print(path)
    return 0


def _query(args: argparse.Namespace) -> int:
    from rag_pipeline.store import StoreError
    from serving.rerank import RerankError
    from serving.retrieval import QueryError, search

    settings = _settings(args)
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
    for rank, hit in enumerate(hits, 1):
        where = f"p. {hit['page']}" if hit["page"] else ""
        print(f"{rank}. {hit['score']:.3f}  {hit['doc_id']}  {where}  {hit['section']}")
        print("   " + " ".join(hit["text"].split())[:300])
    return 0


def _eval(args: argparse.Namespace) -> int:
    from evaluation import beir, pages
    from evaluation.harness import DatasetError
    from rag_pipeline.store import StoreError
    from serving.rerank import RerankError
    from serving.retrieval import QueryError

    settings = _settings(args)
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


def _user(args: argparse.Namespace) -> int:
    from rag_pipeline.workspaces import WorkspaceError, find_workspace
    from serving.access import AccessError, add_user, remove_user

    settings = _settings(args)
    if args.action != "list" and not args.name:
        raise UserError(f"user {args.action} needs a name")
    try:
        if args.action == "add":
            grants, govern = (
                ["*" if grant == "*" else find_workspace(settings, grant).id for grant in named]
                for named in (args.grants, args.govern)
            )
            token = add_user(settings.root, args.name, _new_password(args), grants, govern)
            print(f"{args.name} may use: {', '.join(grants) or 'no workspace yet'}")
            if govern:
                print(f"and govern: {', '.join(govern)}")
            print(f"search API token (shown once): {token}")
            return 0
        if args.action == "remove":
            remove_user(settings.root, args.name)
            print(f"removed {args.name}")
            return 0
    except (AccessError, WorkspaceError) as error:
        raise UserError(str(error)) from error
    for name, grants in settings.access.users.items():
        governs = f"  (governs {', '.join(grants.govern)})" if grants.govern else ""
        print(f"{name:<20}  {', '.join(grants.workspaces) or '-'}{governs}")
    return 0


def _new_password(args: argparse.Namespace) -> str | None:
    import getpass

    if args.no_password:
        return None
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass(f"password for {args.name}: ")
        if password != getpass.getpass("again: "):
            raise UserError("the two passwords differ")
    if len(password) < 8:
        raise UserError("a password has at least 8 characters")
    return password


def _serve(args: argparse.Namespace) -> int:
    from rag_pipeline.embedding.image import ImageModelError
    from rag_pipeline.store import StoreBusyError
    from serving.access import AccessError, check_binding
    from serving.answer import AnswerError
    from serving.rerank import RerankError

    settings = _settings(args)
    host = args.host or settings.serving.host
    port = args.port or settings.serving.port
    try:
        check_binding(host, settings.access)
    except AccessError as error:
        raise UserError(str(error)) from error
    print(f"preparing the search indexes under {settings.home} …", file=sys.stderr)
    from rag_pipeline.defs.observations import observe_availability
    from serving.server import serve
    from serving.workspaces import ServedWorkspaces

    workspaces = ServedWorkspaces(settings, observe_availability)
    try:
        workspaces.open_all()  # a bad model or a busy store fails now, not at a first question
    except StoreBusyError as error:
        workspaces.close()
        raise UserError(f"{error} (is the page already served from this home?)") from error
    except (AnswerError, RerankError, ImageModelError) as error:
        workspaces.close()
        raise UserError(str(error)) from error
    print(f"chat page on http://{host}:{port}/ (search API: /api/search?q=…)", file=sys.stderr)
    try:
        serve(workspaces, host, port)
    finally:
        workspaces.close()
    return 0


def _watch(args: argparse.Namespace) -> int:
    import signal
    import threading

    from rag_pipeline.orchestration.watch import watch

    settings = _settings(args)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    folders = ", ".join(str(folder) for folder in settings.watched_folders)
    print(f"watching {folders} (and every workspace's folders); Ctrl-C to stop", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        watch(settings, stop)
    return 0


def _ui(args: argparse.Namespace) -> int:
    from rag_pipeline.defs.direct import report_every_workspace
    from rag_pipeline.defs.instance import write_instance_config

    settings = _settings(args)
    report_every_workspace(settings)  # what `index` did without Dagster, shown from the start
    # First: it also sets what Dagster reads from os.environ, copied below.
    dagster_home = write_instance_config(settings)
    environment = os.environ | {
        "DAGSTER_HOME": str(dagster_home),
        "RAG_PIPELINE_HOME": str(settings.home),
    }
    # Through this interpreter: the venv's scripts need not be on PATH.
    command = [
        sys.executable,
        "-m",
        "dagster",
        "dev",
        "-m",
        "rag_pipeline.definitions",
        "-p",
        str(args.port),
        "-h",
        args.host,
    ]
    os.execve(command[0], command, environment)
    return 0  # not reached: exec replaces this process


def console_main() -> NoReturn:
    """The ``rag-pipeline`` command: :func:`main`, then exit without sweeping memory.

    At exit Python garbage-collects every object; after a Dagster run that alone takes half a
    second, for memory the operating system frees anyway.
    """
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    console_main()
