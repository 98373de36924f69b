"""The indexing engine, without Dagster: the stages declared once (``stage_table.py``), a run
over a batch of documents (``run.py``; what its stages report, ``reports.py``; its pictures
made chunks, ``pictures.py``), its atomic commit (``commit.py``) and checks (``checks.py``),
what a pass must do (``planning.py``), and a run without Dagster kept for Dagster to report
(``direct.py``)."""
