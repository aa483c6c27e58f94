"""Integrations with other libraries and frameworks, each imported only by those who use it."""
