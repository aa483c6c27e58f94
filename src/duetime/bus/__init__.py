"""The event bus's vocabulary: routes and subscriptions as pure functions, who subscribes, and
the option sets of sources and destinations.

Sources (``duetime.sources``) and destinations (``duetime.destinations``) are packages of their
own, because applications import them by name; :mod:`duetime.dispatch` puts these together at
run time.
"""
