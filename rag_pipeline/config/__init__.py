"""All configuration in one typed object.

Precedence, highest first: values passed in code (CLI flags), environment variables
(``RAG_PIPELINE_*``, nested with ``__``, e.g. ``RAG_PIPELINE_CHUNKING__MAX_TOKENS=200``; also
``QDRANT_URL`` / ``QDRANT_API_KEY`` and ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``),
``<home>/settings.json``, defaults.
``<home>/settings.json`` is where the CLI remembers the watched folders; users may add any other
setting there too.

A workspace other than the default one lives in ``<home>/workspaces/<id>/``: its own catalog,
store, stage files and conversations, its own ``settings.json`` (its watched folders, and any
setting it wants different), over the installation's ``<home>/settings.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator
from pydantic_settings import (
    BaseSettings,
    JsonConfigSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from rag_pipeline.config.home import (
    DEFAULT_HOME,
    HOME_ENV,
    installation_home,
    resolve_home,
    workspace_home,
)
from rag_pipeline.config.indexing import (
    DEFAULT_DENSE_MODEL,
    MULTILINGUAL_DENSE_MODEL,
    CatalogSettings,
    ChunkingSettings,
    DagsterSettings,
    EmbeddingSettings,
    ImageSettings,
    IndexingSettings,
    ParsingSettings,
    RedactionSettings,
    StoreSettings,
)
from rag_pipeline.config.serving import (
    AccessSettings,
    AnswerSettings,
    RerankSettings,
    RetrievalSettings,
    ServingSettings,
    UserSettings,
)
from rag_pipeline.config.sources import (
    SETTINGS_FILE,
    _ConventionalEnvSource,
    _InstallationSettingsSource,
    stored_settings,
    write_stored_settings,
)
from rag_pipeline.ids import DEFAULT_WORKSPACE, is_workspace_id

if TYPE_CHECKING:
    from upath import UPath

__all__ = [
    "DEFAULT_DENSE_MODEL",
    "DEFAULT_HOME",
    "HOME_ENV",
    "MULTILINGUAL_DENSE_MODEL",
    "SETTINGS_FILE",
    "AccessSettings",
    "AnswerSettings",
    "CatalogSettings",
    "ChunkingSettings",
    "DagsterSettings",
    "EmbeddingSettings",
    "ImageSettings",
    "IndexingSettings",
    "ParsingSettings",
    "RedactionSettings",
    "RerankSettings",
    "RetrievalSettings",
    "ServingSettings",
    "Settings",
    "StoreSettings",
    "UserSettings",
    "installation_home",
    "load_settings",
    "resolve_home",
    "stored_settings",
    "workspace_home",
    "write_stored_settings",
]


class Settings(BaseSettings):
    """Everything the pipeline and the CLI can be told."""

    model_config = SettingsConfigDict(
        env_prefix="RAG_PIPELINE_",
        env_nested_delimiter="__",
        extra="ignore",
    )

    home: Path = Field(
        DEFAULT_HOME,
        description="The workspace's folder: the installation's home for the default workspace.",
    )
    workspace: str = Field(DEFAULT_WORKSPACE, description="The workspace's id.")
    sources: list[Path] = Field(
        default_factory=list,
        description="Watched folders besides the workspace's uploads (default workspace: "
        "<home>/inbox when none is given).",
    )
    indexing: IndexingSettings = IndexingSettings()
    parsing: ParsingSettings = ParsingSettings()
    chunking: ChunkingSettings = ChunkingSettings()
    redaction: RedactionSettings = RedactionSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    images: ImageSettings = ImageSettings()
    store: StoreSettings = StoreSettings()
    catalog: CatalogSettings = CatalogSettings()
    dagster: DagsterSettings = DagsterSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    rerank: RerankSettings = RerankSettings()
    answer: AnswerSettings = AnswerSettings()
    serving: ServingSettings = ServingSettings()
    access: AccessSettings = AccessSettings()

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, home: Path) -> Path:
        return home.expanduser().resolve()

    @field_validator("workspace")
    @classmethod
    def _workspace_id(cls, workspace: str) -> str:
        if not is_workspace_id(workspace):
            raise ValueError(f"not a workspace id: {workspace!r}")
        return workspace

    @field_validator("sources")
    @classmethod
    def _absolute_sources(cls, sources: list[Path]) -> list[Path]:
        return [source.expanduser().resolve() for source in sources]

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        given = init_settings()
        home = resolve_home(given.get("home"))
        stored: tuple[PydanticBaseSettingsSource, ...] = (
            JsonConfigSettingsSource(settings_cls, json_file=home / SETTINGS_FILE),
        )
        if given.get("workspace", DEFAULT_WORKSPACE) != DEFAULT_WORKSPACE:
            root = installation_home(home)
            stored += (_InstallationSettingsSource(settings_cls, root / SETTINGS_FILE),)
        return (init_settings, env_settings, _ConventionalEnvSource(settings_cls), *stored)

    @property
    def root(self) -> Path:
        """The installation's home: the default workspace's, holding every other workspace."""
        return self.home if self.workspace == DEFAULT_WORKSPACE else installation_home(self.home)

    @property
    def stage_root(self) -> UPath:
        """Where the workspace's stage files and pictures live (``indexing.stage_url``)."""
        from upath import UPath  # not on every command's path: it costs a tenth of a second

        if self.indexing.stage_url is None:
            return UPath(self.home)
        return workspace_home(UPath(self.indexing.stage_url), self.workspace)

    @property
    def upload_folder(self) -> Path:
        """Where the page puts uploaded files; watched once it exists."""
        return self.home / "uploads"

    @property
    def watched_folders(self) -> list[Path]:
        inbox = [self.home / "inbox"] if self.workspace == DEFAULT_WORKSPACE else []
        folders = self.sources or inbox
        if self.upload_folder.is_dir() and self.upload_folder not in folders:
            folders = [*folders, self.upload_folder]
        return folders

    @property
    def collection_prefix(self) -> str:
        """What the workspace's Qdrant collections are named by (with their models' hash), so
        that workspaces and installations can share one Qdrant server."""
        if self.workspace == DEFAULT_WORKSPACE:
            return self.store.collection
        return f"{self.store.collection}_{self.workspace.replace('-', '_')}"

    @property
    def catalog_schema(self) -> str | None:
        """The PostgreSQL schema of the workspace's catalog (None: the connection's own)."""
        return None if self.workspace == DEFAULT_WORKSPACE else self.collection_prefix

    def remember_sources(self, sources: list[Path]) -> Settings:
        """Store ``sources`` in ``<home>/settings.json`` and return settings that use them."""
        return self.in_home(self.home, sources)

    def add_sources(self, folders: list[Path]) -> Settings:
        """The watched folders and ``folders`` (remembered), without repeats."""
        added = [Path(folder).expanduser().resolve() for folder in folders]
        return self.remember_sources(list(dict.fromkeys([*self.sources, *added])))

    def remove_sources(self, folders: list[Path]) -> Settings:
        """The watched folders but ``folders`` (remembered): their documents leave the index at
        the next run."""
        removed = {Path(folder).expanduser().resolve() for folder in folders}
        return self.remember_sources([source for source in self.sources if source not in removed])

    def in_home(self, home: Path, sources: list[Path]) -> Settings:
        """Settings for another home watching ``sources``, with this home's stored settings.

        Written to ``<home>/settings.json``: an indexing run reads its settings from there (and
        the environment), not from this object.
        """
        stored = stored_settings(self.home)
        stored["sources"] = [str(Path(source).expanduser().resolve()) for source in sources]
        write_stored_settings(home, stored)
        if home == self.home:
            return load_settings(self.root, self.workspace)
        return load_settings(home)

    def vector_models(self) -> dict[str, dict[str, Any]]:
        """The settings that choose and load the models a collection's vectors come from."""
        return {
            section: getattr(self, section).model_dump(mode="json", include=set(names))
            for section, names in _VECTOR_MODEL_FIELDS.items()
        }

    def with_vector_models(self, models: dict[str, dict[str, Any]]) -> Settings:
        """These settings with another collection's vector models (queries embed with them)."""
        changed = {
            section: type(getattr(self, section)).model_validate(
                getattr(self, section).model_dump() | _RECORDED_BEFORE.get(section, {}) | values
            )
            for section, values in models.items()
        }
        return self.model_copy(update=changed)


# A collection records these (Settings.vector_models), so that its vectors are always queried
# with the models that made them, whatever the settings say meanwhile.
_VECTOR_MODEL_FIELDS = {
    "embedding": (
        "dense_model",
        "dense_model_path",
        "multilingual_model",
        "sparse_model",
        "bm25_avg_len",
        "page_keywords",
        "page_bm25_avg_len",
        "splade_model",
        "splade_model_path",
    ),
    "images": ("clip_model", "clip_pretrained"),
}
# What a field missing from a collection's record stands for: the record is older than the
# field (a collection made before multilingual vectors or page keywords has none).
_RECORDED_BEFORE: dict[str, dict[str, Any]] = {
    "embedding": {"multilingual_model": None, "page_keywords": False}
}


def load_settings(
    home: str | Path | None = None, workspace: str | None = None, **overrides: Any
) -> Settings:
    """Settings of ``workspace`` (default: the default one) of the installation at ``home``
    (see :func:`resolve_home`), with ``overrides`` on top."""
    workspace = workspace or DEFAULT_WORKSPACE
    root = resolve_home(home)
    return Settings(home=workspace_home(root, workspace), workspace=workspace, **overrides)
