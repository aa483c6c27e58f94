"""End-to-end tests: the real console script and the real database."""
