"""The CLI's log lines go to the process's stderr as it is when they are written."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import pytest

from rag_pipeline.cli import main


def test_log_lines_follow_stderr_when_a_host_swaps_and_closes_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    main(["status", "--home", str(tmp_path / "home")])  # any command sets the logging up
    first.close()  # as a test's capture is closed when its test ends
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    logging.getLogger("rag_pipeline.cli").info("indexed 1 file")
    assert second.getvalue() == "indexed 1 file\n"
