"""The facade and the process runner: what ``duetime.App`` and ``AsyncApp`` are made of.

``facade`` holds ``AsyncApp`` and its parts (acting, audit, limits, schedules, subscribers,
tokens, each a mixin of one concern); ``sync`` runs it on a private loop for synchronous callers;
``runner`` starts and stops one process's workers, sources and node services.
"""
