"""Redaction: sensitive values replaced between parsing and chunking (``redaction.*``)."""

from rag_pipeline.redaction.redactor import MASK, Found, Redactor

__all__ = ["MASK", "Found", "Redactor"]
