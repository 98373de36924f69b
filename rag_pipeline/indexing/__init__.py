"""Indexing: a run over a batch of documents (``run.py``), its atomic commit (``commit.py``) and
checks (``checks.py``), and one incremental pass over the watched folders (``incremental.py``)."""
