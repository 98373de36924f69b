"""The preview's governing row: a button per action, shown to those who may govern the
workspace when it fits where the passage stands, and each wired to its action."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from serving.page.governance import ACTIONS, Governance


@dataclass(frozen=True)
class GoverningRow:
    row: gr.Row  # hidden from those who may not govern the workspace
    buttons: list[gr.Button]  # one per action, in the order of ``ACTIONS``

    @property
    def outputs(self) -> list[Any]:
        """The row and each button: what ``governance.offered`` sets."""
        return [self.row, *self.buttons]


def lay_out_governing() -> GoverningRow:
    """For users who may govern the workspace: take the passage out of search, or put it
    back (each button shown when it fits where the passage stands)."""
    with gr.Row(visible=False) as row:
        buttons = [
            gr.Button(
                action.label,
                size="sm",
                variant=action.variant,
                visible=False,
                elem_id=action.elem_id,
            )
            for action in ACTIONS
        ]
    return GoverningRow(row, buttons)


def wire_governing(
    governing: GoverningRow,
    governance: Governance,
    shown_chunk: gr.State,
    workspace: gr.Dropdown,
    previewing: Callable[[Any], None],
) -> None:
    """Each button sets its action on the passage shown; ``previewing`` shows it again after
    (where the passage stands now, and the buttons that fit it)."""
    for action, button in zip(ACTIONS, governing.buttons, strict=True):
        previewing(
            button.click(
                governance.button(action),
                [shown_chunk, workspace],
                None,
                api_name="govern",
                api_visibility="private",
            )
        )
