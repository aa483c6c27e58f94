"""Runnable examples of duetime; run them from the repository root (``python -m examples.…``)."""
