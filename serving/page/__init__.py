"""The chat page: Gradio Blocks, thin over :class:`serving.assistant.Assistant`.

Answers stream into the chat with their citation markers as links; under the chat the cited
passages are listed by file; a click on a citation (in the answer or in the list) shows its page
with the passage highlighted, or the passage in its text, beside a link to the original file.
Pictures among the passages show as a gallery; with CLIP configured, an uploaded image finds the
pictures like it and the pages that hold them. Conversations are kept and can be reopened or
deleted; the last query traces are one tab away.

The page opens on the cards of the workspaces the signed-in user may use (``serving.workspaces``),
each opening its workspace, where everything above happens; users granted every workspace create
workspaces there, and rename or delete each by its card. Files uploaded into a workspace go to
its upload folder and are indexed at once.

``layout`` composes the page of its parts, each laid out and wired to its handlers by its own
module: the home by ``home_layout`` (to ``workspaces``), the open workspace by
``workspace_layout`` (to ``chat``), its sources by ``uploads_layout`` (to ``uploads``) and its
governing row by ``governance_layout`` (to ``governance``); the handlers are callable without a
browser. ``render`` writes the page's HTML.
"""

from __future__ import annotations

import os

# Gradio reads these when it builds the page; without them it looks for updates and counts use.
# Set here, before any module of the page imports Gradio.
for _name, _value in (("GRADIO_ANALYTICS_ENABLED", "False"), ("HF_HUB_DISABLE_TELEMETRY", "1")):
    os.environ.setdefault(_name, _value)

import gradio as gr  # noqa: E402  (after the variables above)

from serving.page.layout import PAGE_CSS, build_page  # noqa: E402

__all__ = ["PAGE_CSS", "build_page", "gr"]
