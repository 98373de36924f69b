"""Redaction: sensitive values replaced between parsing and chunking (``redaction.*``)."""

from rag_pipeline.redaction.detectors import DETECTOR_VERSION
from rag_pipeline.redaction.redactor import MASK, Found, Redactor

__all__ = ["DETECTOR_VERSION", "MASK", "Found", "Redactor"]
