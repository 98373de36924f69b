"""``rag-pipeline``: index the watched folders, show their state, query them, serve the page, manage
workspaces and users, open Dagster's UI."""

from __future__ import annotations

import argparse
from pathlib import Path

from rag_pipeline.cli.asking import eval_command, query_command
from rag_pipeline.cli.indexing import (
    availability_command,
    check_command,
    export_command,
    index_command,
    sources_command,
    status_command,
    workspace_command,
)
from rag_pipeline.cli.serving import serve_command, ui_command, user_command, watch_command


def argument_parser() -> argparse.ArgumentParser:
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

    index = command("index", index_command, "Index the watched folders once, incrementally.")
    command(
        "watch",
        watch_command,
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

    status = command(
        "status",
        status_command,
        "Show the documents' states: every document's in a home of a screen's worth, else "
        "those failed, to be indexed again or out of search, and the counts.",
    )
    status.add_argument("--json", action="store_true", help="print JSON (every document)")
    status.add_argument("--all", action="store_true", help="list every document")

    for state, verb, text in (
        ("archived", "archive", "Take a document (or one chunk) out of search, as outdated."),
        ("rejected", "reject", "Take a document (or one chunk) out of search, as wrong."),
        ("active", "activate", "Put an archived or rejected document (or chunk) back."),
    ):
        governed = command(verb, availability_command, f"{text} At once; kept across re-indexing.")
        governed.add_argument("doc_id", metavar="DOC_ID", help="as `status` lists it")
        governed.add_argument(
            "--chunk", type=int, metavar="N", help="only the chunk at this index (`query --json`)"
        )
        governed.set_defaults(state=state)

    sources = command("sources", sources_command, "List, add or remove watched folders.")
    sources.add_argument("action", choices=["list", "add", "remove"], nargs="?", default="list")
    sources.add_argument("folders", nargs="*", type=Path, metavar="DIR")

    check = command(
        "check",
        check_command,
        "Compare the vector store with the catalog: its count, and every point when the count "
        "disagrees; exit 1 when they disagree.",
    )
    check.add_argument(
        "--full",
        action="store_true",
        help="compare every point even when the count agrees (a minute at a million documents)",
    )

    export = command(
        "export",
        export_command,
        "Write the catalog as Parquet (documents, chunks) for DuckDB & co.",
    )
    export.add_argument("--to", type=Path, metavar="DIR", help="default: <home>/export")

    query = command("query", query_command, "Search the index (hybrid dense + sparse).")
    query.add_argument("text", help="what to search for")
    query.add_argument("--top-k", type=int, help="number of hits (default: retrieval.top_k, 8)")
    query.add_argument("--json", action="store_true", help="print JSON")

    evaluation = command(
        "eval",
        eval_command,
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
        workspace_command,
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
        user_command,
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
        "--contribute",
        action="append",
        default=[],
        metavar="NAME",
        help="add: a workspace the user may also upload files into, and replace what they "
        "uploaded (repeatable; '*': all)",
    )
    user.add_argument(
        "--govern",
        action="append",
        default=[],
        metavar="NAME",
        help="add: a workspace where the user may archive, reject and activate documents "
        "and passages on the page, and upload and replace any upload (repeatable; '*': all)",
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
        serve_command,
        "Serve the chat page and the search API on every workspace of this home.",
        per_workspace=False,
    )
    serve.add_argument("--port", type=int, help="default: serving.port (7860)")
    serve.add_argument("--host", help="default: serving.host (127.0.0.1)")

    ui = command(
        "ui",
        ui_command,
        "Open the Dagster UI on this home folder (dagster dev, with its daemon and the sensor), "
        "and watch every workspace's folders meanwhile: a change is indexed as it settles, "
        "and shown in the UI (as `watch` does), until Ctrl-C or SIGTERM.",
        per_workspace=False,
    )
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--host", default="127.0.0.1")
    ui.add_argument(
        "--no-watch",
        action="store_true",
        help="leave the folders to the sensor's tick (indexing.sensor_seconds)",
    )
    return parser
