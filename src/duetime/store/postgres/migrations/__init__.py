"""Versioned PostgreSQL schema migrations: ``NNNN_name.sql``, applied in order, never edited."""
