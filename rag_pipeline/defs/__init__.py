"""The Dagster wiring over the engine: assets made from the stage table (``assets.py``), their
partitions, runs and run queue, the sensor, the instance's configuration, reporting what ran
without Dagster, and the one module touching Dagster's internals (``compat.py``)."""
