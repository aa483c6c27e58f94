"""Delayed notifications with an acceptance window, on Kafka (or Redis Streams).

See README.md next to this file; ``app.py`` holds the service (source, worker, destination),
``on_kafka.py`` and ``on_redis.py`` the wiring on each broker.
"""
