"""Service-call timers over NATS: durable single-shot timers, answered by DueTimeReached.

See README.md next to this file; ``app.py`` holds the service (source, worker, destination).
"""
