"""Benchmarks of the product itself: relevance on BEIR-layout datasets and latency at catalog scale.

Behind ``skillsearch bench relevance`` and ``skillsearch bench latency``. Needs the ``bench`` extra
(``bm25s``, ``PyStemmer``, ``pytrec-eval-terrier``, ``matplotlib``).
"""
