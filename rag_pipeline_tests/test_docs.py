"""The documentation: the README stays a short guide, every link lands, and the configuration
reference is the settings model's."""

import importlib.util
import re
from collections import Counter
from operator import attrgetter
from pathlib import Path
from types import ModuleType

import pytest

from rag_pipeline.config import Settings

ROOT = Path(__file__).resolve().parents[1]
GUIDES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
README_LIMIT = 12 * 1024


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "generate_configuration", ROOT / "docs" / "generate_configuration.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a file's headings (a repeated heading gets -1, -2…)."""
    seen: Counter[str] = Counter()
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", _prose(markdown), re.MULTILINE):
        anchor = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchors.add(f"{anchor}-{seen[anchor]}" if seen[anchor] else anchor)
        seen[anchor] += 1
    return anchors


def _prose(markdown: str) -> str:
    """The Markdown without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", markdown, flags=re.MULTILINE | re.DOTALL)


def test_readme_is_a_short_guide_with_its_contents_first() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= README_LIMIT
    contents = re.search(r"^## Contents\n\n((?:[ ]*- .+\n)+)", readme, re.MULTILINE)
    assert contents is not None, "README.md has no table of contents"
    listed = set(re.findall(r"\]\(#([^)]+)\)", contents.group(1)))
    title, sections = readme.split("\n", 1)
    assert title == "# rag-pipeline"
    assert listed == _anchors(sections) - {"contents"}


@pytest.mark.parametrize("guide", GUIDES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_link_of_the_guides_lands(guide: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _prose(guide.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # a URL: not checked offline
        path, _, anchor = target.partition("#")
        linked = (guide.parent / path).resolve() if path else guide
        if not linked.exists() or (anchor and anchor not in _anchors(linked.read_text())):
            broken.append(target)
    assert not broken, f"{guide.name} links to what does not exist: {broken}"


def test_configuration_reference_is_generated_from_the_settings() -> None:
    generator = _generator()
    written = (ROOT / "docs" / "configuration.md").read_text()
    assert written == generator.render(), (
        f"docs/configuration.md is stale: run `{generator.COMMAND}` and commit the result"
    )


def test_every_integer_setting_is_set_by_the_variable_the_reference_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rows = re.findall(
        r"^\| `([\w.]+)` \| `(RAG_PIPELINE_\w+)` \| `int`[^|]* \| `(\d+)` \|",
        (ROOT / "docs" / "configuration.md").read_text(),
        re.MULTILINE,
    )
    assert len(rows) > 20
    for _, variable, default in rows:
        monkeypatch.setenv(variable, str(int(default) + 1))
    settings = Settings(home=tmp_path)
    assert {path: attrgetter(path)(settings) for path, _, _ in rows} == {
        path: int(default) + 1 for path, _, default in rows
    }
