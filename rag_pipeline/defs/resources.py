"""The resource every asset uses: the settings of a workspace and the run's Indexer."""

from contextlib import ExitStack

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from rag_pipeline.config import Settings, load_settings
from rag_pipeline.defs.partitions import PLAN_TAG
from rag_pipeline.ids import DEFAULT_WORKSPACE, partition_document
from rag_pipeline.indexing.run import Indexer
from rag_pipeline.locking import run_lock


class IndexingResource(ConfigurableResource):
    """Opens a workspace's stores for one run, holding its run lock meanwhile."""

    home: str | None = Field(
        default=None,
        description="The rag-pipeline home folder; default $RAG_PIPELINE_HOME or ./data.",
    )
    workspace: str = Field(default=DEFAULT_WORKSPACE, description="The workspace's id.")
    _exit_stack: ExitStack = PrivateAttr(default_factory=ExitStack)
    _indexer: Indexer | None = PrivateAttr(default=None)

    def settings(self) -> Settings:
        return load_settings(self.home, self.workspace)

    def documents(self, partition_keys: list[str]) -> list[str]:
        """The document ids of the run's partitions, all of which are this workspace's."""
        doc_ids = []
        for key in partition_keys:
            workspace, doc_id = partition_document(key)
            if workspace != self.workspace:
                raise ValueError(f"partition {key!r} is not of workspace {self.workspace!r}")
            doc_ids.append(doc_id)
        return doc_ids

    def setup_for_execution(self, context: InitResourceContext) -> None:
        settings = self.settings()
        # The runs of one plan run side by side; any other run alone, re-executions too: they
        # carry their parent's plan tag, but not its plan (the partitions have moved since).
        run = context.dagster_run
        alone = PLAN_TAG not in run.tags or run.parent_run_id is not None
        self._exit_stack.enter_context(run_lock(settings.home, context.run_id, alone=alone))
        self._indexer = Indexer(settings)
        self._exit_stack.callback(self._indexer.close)

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self._exit_stack.close()

    @property
    def indexer(self) -> Indexer:
        if self._indexer is None:
            raise RuntimeError("IndexingResource used outside a run")
        return self._indexer
