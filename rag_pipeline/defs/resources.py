"""The resource every asset uses: the settings of a workspace and the run's Indexer."""

from contextlib import ExitStack

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from rag_pipeline.config import Settings, load_settings
from rag_pipeline.defs.partitions import PLAN_TAG, documents_by_partition
from rag_pipeline.ids import DEFAULT_WORKSPACE, is_bucket, partition_document
from rag_pipeline.indexing.run import Indexer
from rag_pipeline.locking import lock_place, run_lock
from rag_pipeline.manifest import find_changes


class IndexingResource(ConfigurableResource):
    """Opens a workspace's stores for one run, holding its run lock meanwhile."""

    home: str | None = Field(
        default=None,
        description="The rag-pipeline home folder; default $RAG_PIPELINE_HOME or ./data.",
    )
    workspace: str = Field(default=DEFAULT_WORKSPACE, description="The workspace's id.")
    bucket_documents: list[str] = Field(
        default_factory=list,
        description="With dagster.document_buckets, the documents of the run's buckets to index "
        "or delete, as the planner found them; when empty (a run launched by hand), the folders "
        "are scanned for every document the buckets hold.",
    )
    bucket_unchanged: dict[str, int] = Field(
        default_factory=dict,
        description="With bucket_documents, how many other documents each bucket holds: left "
        "alone, counted in the bucket's reports.",
    )
    _exit_stack: ExitStack = PrivateAttr(default_factory=ExitStack)
    _indexer: Indexer | None = PrivateAttr(default=None)
    _members: dict[str, list[str]] | None = PrivateAttr(default=None)

    def settings(self) -> Settings:
        return load_settings(self.home, self.workspace)

    def documents(self, partition_keys: list[str]) -> list[str]:
        """The document ids of the run's partitions (see :meth:`members`)."""
        return [doc_id for doc_ids in self.members(partition_keys).values() for doc_id in doc_ids]

    def members(self, partition_keys: list[str]) -> dict[str, list[str]]:
        """Partition key → its documents, for the run's partitions, all of this workspace's:
        a document's partition holds it; a bucket the documents in it the planner found to
        index or delete (``bucket_documents``), or, in a run launched by hand, every document
        of the workspace that falls in it, on disk or to be deleted (found once per run:
        every step asks)."""
        if self._members is None or list(self._members) != partition_keys:
            members: dict[str, list[str]] = {}
            for key in partition_keys:
                workspace, name = partition_document(key)
                if workspace != self.workspace:
                    raise ValueError(f"partition {key!r} is not of workspace {self.workspace!r}")
                members[key] = [] if is_bucket(name) else [name]
            if any(not doc_ids for doc_ids in members.values()):
                self._fill_buckets(members)
            self._members = members
        return self._members

    def _fill_buckets(self, members: dict[str, list[str]]) -> None:
        settings, indexer = self.settings(), self.indexer
        buckets = settings.dagster.document_buckets
        if not buckets:
            raise ValueError(
                "the run's partitions are buckets, but dagster.document_buckets is 0: plan again"
            )
        if self.bucket_documents:
            listed = documents_by_partition(self.workspace, self.bucket_documents, buckets)
        else:  # a scan of every folder, which the planner has already made
            diff = find_changes(settings, indexer.catalog, indexer.collection.name, every_file=True)
            listed = documents_by_partition(self.workspace, [*diff.files, *diff.deleted], buckets)
        for key, doc_ids in members.items():
            if not doc_ids:
                members[key] = listed.get(key, [])

    def setup_for_execution(self, context: InitResourceContext) -> None:
        settings = self.settings()
        # The runs of one plan run side by side; any other run alone, re-executions too: they
        # carry their parent's plan tag, but not its plan (the partitions have moved since).
        run = context.dagster_run
        alone = PLAN_TAG not in run.tags or run.parent_run_id is not None
        self._exit_stack.enter_context(run_lock(lock_place(settings), context.run_id, alone=alone))
        self._indexer = Indexer(settings)
        self._exit_stack.callback(self._indexer.close)

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self._exit_stack.close()

    @property
    def indexer(self) -> Indexer:
        if self._indexer is None:
            raise RuntimeError("IndexingResource used outside a run")
        return self._indexer
