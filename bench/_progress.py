"""What a bench that outlives a working session keeps of itself: its steps' figures and its
builds' times, in ``progress.json`` in its work folder, saved after every move."""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from _harness import Measured


@dataclass
class Step:
    documents: int
    figures: dict[str, str] = field(default_factory=dict)
    per_100k: float = 0.0  # the build's seconds per 100,000 documents

    def put(self, name: str, value: str, detail: str = "") -> None:
        """A figure for the table; ``detail`` (the command's own report) is only printed."""
        self.figures[name] = value
        print(f"  {name}: {value}" + (f" | {detail}" if detail else ""), flush=True)


@dataclass
class Build:
    """One step's build, over the ``index`` runs it took: a run stopped with its session (the
    bench resumed with the same ``--work``) counts to its last heartbeat, its CPU unknown."""

    seconds: float = 0.0
    cpu_seconds: float = 0.0
    peak_mb: float = 0.0
    peak_anonymous_mb: float = 0.0  # of the finished run (heartbeats carry the RSS only)
    runs: int = 0
    running: float = 0.0  # the current run's seconds at its last heartbeat
    finished: bool = False
    summary: str = ""

    def beat(self, seconds: float, peak_mb: float) -> None:
        self.running, self.peak_mb = seconds, max(self.peak_mb, peak_mb)

    def stopped(self) -> None:
        """The run under way was stopped (the bench is resuming): count it to its heartbeat."""
        self.seconds, self.running = self.seconds + self.running, 0.0

    def finish(self, run: Measured) -> None:
        self.seconds += run.seconds
        self.cpu_seconds += run.cpu_seconds
        self.peak_mb = max(self.peak_mb, run.peak_rss_mb)
        self.peak_anonymous_mb = run.peak_anonymous_mb
        self.running, self.finished, self.summary = 0.0, True, run.summary

    def figure(self) -> str:
        cpu = f"CPU {self.cpu_seconds:,.1f} s"
        if self.runs > 1:
            cpu += " of the last run"
        anonymous = (
            f"; {self.peak_anonymous_mb:,.0f} MB anonymous in the last run"
            if self.peak_anonymous_mb  # not kept by runs before it was measured
            else ""
        )
        figure = f"{self.seconds:,.2f} s ({cpu}, peak RSS {self.peak_mb:,.0f} MB{anonymous})"
        if self.runs > 1:
            figure += f" in {self.runs} runs, {self.runs - 1} stopped with a session and resumed"
        return figure


@dataclass
class Progress:
    """What the run has done, kept in the work folder after every move: a bench stopped (the
    session it ran in ended) and started again with the same ``--work`` goes on from there."""

    path: Path
    written: int = 0  # documents written to the share
    steps: list[Step] = field(default_factory=list)
    builds: dict[int, Build] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def of(cls, work: Path) -> Progress:
        path = work / "progress.json"
        if not path.exists():
            return cls(path)
        saved = json.loads(path.read_text())
        progress = cls(
            path,
            saved["written"],
            [Step(**step) for step in saved["steps"]],
            {int(size): Build(**build) for size, build in saved["builds"].items()},
        )
        for build in progress.builds.values():
            if not build.finished:
                build.stopped()
        return progress

    def beat(self, seconds: float, peak_mb: float) -> None:
        next(b for b in self.builds.values() if not b.finished).beat(seconds, peak_mb)
        self.save()

    def save(self) -> None:
        saved = {
            "written": self.written,
            "steps": [asdict(step) for step in self.steps],
            "builds": {str(size): asdict(build) for size, build in self.builds.items()},
        }
        with self._lock:
            temporary = self.path.with_suffix(".tmp")
            temporary.write_text(json.dumps(saved, indent=1))
            temporary.replace(self.path)
