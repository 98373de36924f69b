"""What a new user meets first: the README's commands and CI running the same test command."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    return [block.strip() for block in blocks[:2]]


def test_readme_opens_with_an_install_and_run_command_and_a_test_command() -> None:
    run, test = _readme_commands()
    assert "pip install -e ." in run and "rag-pipeline index --source samples" in run
    assert "pytest" in test


def test_ci_runs_exactly_the_readme_test_command() -> None:
    _, test = _readme_commands()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == test


def test_the_samples_the_first_command_indexes_ship_with_the_project() -> None:
    assert {path.suffix for path in (ROOT / "samples").iterdir()} >= {".md", ".pdf", ".txt"}
