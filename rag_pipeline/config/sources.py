"""Where settings come from besides the code and ``RAG_PIPELINE_*``: the stored settings files
and the variables other tools use."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

from pydantic_settings import BaseSettings, JsonConfigSettingsSource, PydanticBaseSettingsSource

from rag_pipeline.files import write_atomically

SETTINGS_FILE = "settings.json"


class _InstallationSettingsSource(JsonConfigSettingsSource):
    """The installation's ``settings.json`` under a workspace: all but the default workspace's
    own watched folders."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path) -> None:
        super().__init__(settings_cls, json_file=path)

    def __call__(self) -> dict[str, Any]:
        values = super().__call__()
        values.pop("sources", None)
        return values


class _ConventionalEnvSource(PydanticBaseSettingsSource):
    """The variables other tools use for the same things: Qdrant's and OpenAI clients'."""

    VARIABLES: ClassVar[dict[str, tuple[str, str]]] = {
        "QDRANT_URL": ("store", "url"),
        "QDRANT_API_KEY": ("store", "api_key"),
        "OPENAI_BASE_URL": ("answer", "base_url"),
        "OPENAI_API_KEY": ("answer", "api_key"),
    }

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, dict[str, str]] = {}
        for variable, (section, key) in self.VARIABLES.items():
            if os.environ.get(variable):
                values.setdefault(section, {})[key] = os.environ[variable]
        return values


def stored_settings(home: Path) -> dict[str, Any]:
    """What ``<home>/settings.json`` holds (nothing when it does not exist)."""
    path = home / SETTINGS_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def write_stored_settings(home: Path, stored: dict[str, Any]) -> None:
    """Replace ``<home>/settings.json`` whole (a reader never sees half of it)."""
    text = json.dumps(stored, indent=2, ensure_ascii=False) + "\n"

    def write(temporary: str) -> None:
        Path(temporary).write_text(text)
        Path(temporary).chmod(0o600)  # it may hold password hashes and keys

    write_atomically(home / SETTINGS_FILE, write)
