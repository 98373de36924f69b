"""``rag-pipeline``: :func:`main` parses the command line (:mod:`.parser`) and runs the command
(:mod:`.indexing`, :mod:`.asking`, :mod:`.serving`); heavy modules are imported inside the
commands, so that a command loads only what it uses."""

from __future__ import annotations

import gc
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn, TextIO

from rag_pipeline.cli.common import UserError
from rag_pipeline.cli.parser import argument_parser

__all__ = ["UserError", "console_main", "main"]

# unstructured, Hugging Face libraries and Gradio phone home unless told not to.
for _name, _value in (
    ("DO_NOT_TRACK", "1"),
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("GRADIO_ANALYTICS_ENABLED", "False"),
):
    os.environ.setdefault(_name, _value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argument_parser()
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


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` as it is when a record comes, not as it was when `main` first
    ran: a host that calls `main` and swaps its stderr (a test's capture) may close the old one."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: TextIO) -> None:
        pass


def _configure_logging(verbose: bool) -> None:
    pipeline_logger = logging.getLogger("rag_pipeline")
    if not any(isinstance(handler, _StderrHandler) for handler in pipeline_logger.handlers):
        pipeline_logger.addHandler(_StderrHandler())
    pipeline_logger.setLevel(logging.INFO)
    if not verbose:
        for noisy in ("dagster", "jieba"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def console_main() -> NoReturn:
    """The ``rag-pipeline`` command: :func:`main`, then exit without sweeping memory.

    At exit Python garbage-collects every object; after a Dagster run that alone takes half a
    second, for memory the operating system frees anyway.
    """
    code = main()
    gc.freeze()
    sys.exit(code)
