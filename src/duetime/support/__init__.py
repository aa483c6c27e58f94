"""Small infrastructure every layer may use: JSON text, escaping of control characters, the
event loop and handler threads, lazy imports, request budgets, secrets out of URLs."""
