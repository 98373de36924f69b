"""The home the page opens on: the workspaces' cards, their order and search, and for managers
the boxes that create, rename and delete workspaces; each wired to ``WorkspaceCards``."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from serving.page.workspaces import QUIET, HomeParts, WorkspaceCards, back_home, keep


@dataclass(frozen=True)
class Home:
    view: gr.Column  # the cards' view
    order: gr.Radio  # the cards sorted by name or last opened
    search: gr.Textbox  # shown when there are many cards
    creating: gr.Row  # for managers
    created_name: gr.Textbox
    create: gr.Button
    confirming: gr.Column  # a deletion awaiting its confirmation
    doomed_facts: gr.HTML  # what the deletion takes away
    delete_for_good: gr.Button
    keep_it: gr.Button
    renaming: gr.Column  # the one box for the new name, shown by a card's Rename
    new_name: gr.Textbox
    rename: gr.Button
    keep_name: gr.Button
    listed: gr.State  # counts the changes to the workspaces: each draws the cards anew
    doomed: gr.State  # the workspace whose deletion awaits its confirmation
    renamed: gr.State  # the workspace whose new name is being written


def lay_out_home() -> Home:
    """The home's components, but for the cards: ``draw_cards`` puts them last in it once the
    open workspace's view, which their buttons set, is laid out."""
    with gr.Column(elem_id="home") as view:
        gr.Markdown("## Workspaces")
        with gr.Row():
            order = gr.Radio(
                ["name", "last opened"], value="name", label="Sort by", elem_id="card-order"
            )
            search = gr.Textbox(
                label="Find a workspace", visible=False, elem_id="card-search", scale=2
            )
        with gr.Row(visible=False, elem_id="creating") as creating:
            created_name = gr.Textbox(label="New workspace", elem_id="workspace-name", scale=3)
            create = gr.Button("New", size="sm", elem_id="create-workspace", scale=0, min_width=100)
        with gr.Column(visible=False, variant="panel", elem_id="confirm-delete") as confirming:
            doomed_facts = gr.HTML("", elem_id="doomed")
            with gr.Row():
                delete_for_good = gr.Button(
                    "Delete for good", size="sm", variant="stop", elem_id="delete-for-good"
                )
                keep_it = gr.Button("Keep it", size="sm", elem_id="keep-workspace")
        with gr.Column(visible=False, variant="panel", elem_id="renaming") as renaming, gr.Row():
            new_name = gr.Textbox(label="New name", elem_id="new-name", scale=3)
            rename = gr.Button(
                "Rename",
                size="sm",
                variant="primary",
                elem_id="rename-workspace",
                scale=0,
                min_width=100,
            )
            keep_name = gr.Button("Cancel", size="sm", elem_id="keep-name", scale=0, min_width=100)
        listed, doomed, renamed = gr.State(0), gr.State(None), gr.State(None)
    return Home(
        view=view,
        order=order,
        search=search,
        creating=creating,
        created_name=created_name,
        create=create,
        confirming=confirming,
        doomed_facts=doomed_facts,
        delete_for_good=delete_for_good,
        keep_it=keep_it,
        renaming=renaming,
        new_name=new_name,
        rename=rename,
        keep_name=keep_name,
        listed=listed,
        doomed=doomed,
        renamed=renamed,
    )


def draw_cards(
    home: Home, cards: WorkspaceCards, workspace: gr.Dropdown, opened: gr.Column
) -> None:
    """The cards, last in the home, drawn anew as they are sorted, searched or changed; their
    buttons open the ``workspace`` in its ``opened`` view, or rename or delete it."""
    parts = HomeParts(
        workspace,
        home.view,
        opened,
        home.listed,
        home.doomed,
        home.confirming,
        home.doomed_facts,
        home.renamed,
        home.renaming,
        home.new_name,
    )
    with home.view:
        # One render at a time: two of one session at once (the page's load and a change of
        # the list) break Gradio's walk over the session's blocks (gradio-app/gradio#9991).
        @gr.render(
            inputs=[home.order, home.search, home.listed],
            concurrency_limit=1,
            concurrency_id="workspace-cards",
        )
        def show_cards(sort_by: str, wanted: str, _changes: int, request: gr.Request) -> None:
            cards.draw(sort_by, wanted, request, parts)


def wire_home(
    page: gr.Blocks,
    home: Home,
    cards: WorkspaceCards,
    workspace: gr.Dropdown,
    opened: gr.Column,
    to_home: gr.Button,
    signed_in: gr.HTML,
    resumed: gr.State,
) -> None:
    """Creating, deleting and renaming workspaces; ``to_home`` back from the ``opened`` view;
    and the page's load: the workspaces listed, who is ``signed_in``, and the workspace and
    conversation its address names opened, that conversation ``resumed``."""
    home.create.click(
        cards.create,
        [home.created_name, home.listed],
        [workspace, home.search, home.listed, home.created_name, home.view, opened],
        api_name="create_workspace",
        api_visibility="private",
        show_progress=QUIET,
    )
    home.delete_for_good.click(
        cards.delete,
        [home.doomed, workspace, home.listed],
        [workspace, home.search, home.listed, home.doomed, home.confirming],
        api_name="delete_workspace",
        api_visibility="private",
        show_progress=QUIET,
    )
    home.keep_it.click(
        keep,
        None,
        [home.doomed, home.confirming],
        api_name="keep_workspace",
        api_visibility="private",
    )
    for renamed_by in (home.rename.click, home.new_name.submit):
        renamed_by(
            cards.rename,
            [home.renamed, home.new_name, workspace, home.listed],
            [workspace, home.listed, home.renamed, home.renaming],
            api_name="rename_workspace",
            api_visibility="private",
            show_progress=QUIET,
        )
    home.keep_name.click(
        keep, None, [home.renamed, home.renaming], api_name="keep_name", api_visibility="private"
    )
    to_home.click(
        back_home,
        home.listed,
        [home.view, opened, home.listed, workspace],
        api_visibility="private",
    )
    page.load(
        cards.on_load,
        None,
        [workspace, home.search, signed_in, home.creating, home.view, opened, resumed],
        api_visibility="private",
    )
