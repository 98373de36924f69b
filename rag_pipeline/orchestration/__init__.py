"""Above the engine (``indexing/``) and its Dagster wiring (``defs/``): one incremental pass over
the watched folders and how it runs (``incremental.py``, ``executors.py``), and the watcher that
starts a pass when a file changes (``watch.py``)."""
