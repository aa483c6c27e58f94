"""Seed 004 over Redis Streams: delayed notifications with an acceptance window.

See README.md next to this file; ``app.py`` holds the service (source, worker, destination).
"""
