"""Seed 003 over NATS: durable single-shot timers for service calls, answered by DueTimeReached.

See README.md next to this file; ``app.py`` holds the service (source, worker, destination).
"""
