"""The event bus's pure parts: routes and subscriptions, dispatch, and destination options.

Sources (``duetime.sources``) and destinations (``duetime.destinations``) sit beside it as
packages of their own, because applications import them by name.
"""
