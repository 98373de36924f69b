"""``python -m rag_pipeline.cli``: the ``rag-pipeline`` command."""

from rag_pipeline.cli import console_main

if __name__ == "__main__":
    console_main()
