"""The facade and the process runner: what ``duetime.App`` and ``AsyncApp`` are made of.

``facade`` holds ``AsyncApp``; its parts (timers, events, schedules, limits, tokens, audit,
namespaces) are each a class of its own module on one shared ``context``; ``sync`` and
``blocking`` run them on a private loop for synchronous callers; ``runner`` starts and stops one
process's workers, sources and node services.
"""
