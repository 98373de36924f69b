"""The Dagster code location: ``dagster dev`` (see workspace.yaml) and the CLI load this."""

import os

from dagster import Definitions

from rag_pipeline.defs.assets import document_assets
from rag_pipeline.defs.instance import use_dagster_environment
from rag_pipeline.defs.queue import QUEUE_ONLY_ENV
from rag_pipeline.defs.resources import IndexingResource
from rag_pipeline.defs.runs import index_documents_job
from rag_pipeline.defs.sensors import hourly_index_schedule, watched_folders_sensor

use_dagster_environment()

# A daemon that `index --parallel` starts only runs the queue (see defs/queue.py).
_watching = not os.environ.get(QUEUE_ONLY_ENV)

defs = Definitions(
    assets=document_assets,
    jobs=[index_documents_job],
    sensors=[watched_folders_sensor] if _watching else [],
    schedules=[hourly_index_schedule] if _watching else [],
    resources={"indexing": IndexingResource()},
)
