"""The commands that serve: user (the page's and the API's users), serve, watch, ui."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from rag_pipeline.cli.common import UserError, settings_of


def user_command(args: argparse.Namespace) -> int:
    from rag_pipeline.workspaces import WorkspaceError, find_workspace
    from serving.access import AccessError, add_user, remove_user

    settings = settings_of(args)
    if args.action != "list" and not args.name:
        raise UserError(f"user {args.action} needs a name")
    try:
        if args.action == "add":
            grants, contribute, govern = (
                ["*" if grant == "*" else find_workspace(settings, grant).id for grant in named]
                for named in (args.grants, args.contribute, args.govern)
            )
            token = add_user(
                settings.root, args.name, _new_password(args), grants, govern, contribute
            )
            print(f"{args.name} may use: {', '.join(grants) or 'no workspace yet'}")
            if contribute:
                print(f"and upload into: {', '.join(contribute)}")
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
        roles = [
            f"{role} {', '.join(named)}"
            for role, named in (("contributes to", grants.contribute), ("governs", grants.govern))
            if named
        ]
        also = f"  ({'; '.join(roles)})" if roles else ""
        print(f"{name:<20}  {', '.join(grants.workspaces) or '-'}{also}")
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


def serve_command(args: argparse.Namespace) -> int:
    from rag_pipeline.embedding.image import ImageModelError
    from rag_pipeline.store import StoreBusyError
    from serving.access import AccessError, check_binding
    from serving.answer import AnswerError
    from serving.rerank import RerankError

    settings = settings_of(args)
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


def watch_command(args: argparse.Namespace) -> int:
    import signal
    import threading

    from rag_pipeline.orchestration.watch import watch

    settings = settings_of(args)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    folders = ", ".join(str(folder) for folder in settings.watched_folders)
    print(f"watching {folders} (and every workspace's folders); Ctrl-C to stop", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        watch(settings, stop)
    return 0


# How long Dagster's processes have to end once `ui` is told to stop, before they are killed:
# the whole UI is gone within 10 s.
UI_STOP_SECONDS = 8


def ui_command(args: argparse.Namespace) -> int:
    import signal
    import threading

    from rag_pipeline.defs.direct import report_every_workspace
    from rag_pipeline.defs.instance import write_instance_config
    from rag_pipeline.orchestration.watch import watch
    from rag_pipeline.processes import start_process_group, stop_process_group

    settings = settings_of(args)
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
    # In a session of its own, so that stopping `ui` (SIGTERM from a service manager, Ctrl-C)
    # stops the webserver, the daemon and their code servers with it.
    dagster = start_process_group(command, environment)
    stop = threading.Event()
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, lambda *_: stop.set())
    threading.Thread(target=lambda: (dagster.wait(), stop.set()), daemon=True).start()
    try:
        if args.no_watch:
            stop.wait()
        else:
            watch(settings, stop)  # which shows a pass through the direct path in Dagster at once
    finally:
        ended_by_itself = dagster.poll() is not None
        if not ended_by_itself:
            # Killed after that: a webserver with a browser's connection open can wait for it
            # indefinitely, and what a kill interrupts, the next run takes up.
            stop_process_group(dagster, timeout_seconds=UI_STOP_SECONDS)
    return dagster.returncode if ended_by_itself and dagster.returncode else 0
