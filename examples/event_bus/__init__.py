"""A PostgreSQL event bus on duetime: heterogeneous nodes, a DLQ and a daily cleanup.

See README.md next to this file: ``app.py`` builds each node (its handlers and routes),
``shop.py`` holds the read model the transactional handlers write, ``operate.py`` what a
producer or an operator does (emit, wait, replay, report), ``__main__.py`` the command line.
"""
