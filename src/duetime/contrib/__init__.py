"""Integrations with other libraries, each imported only by those who use it."""
