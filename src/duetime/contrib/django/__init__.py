"""duetime in a Django project: ``INSTALLED_APPS += ["duetime.contrib.django"]``.

Settings come from ``settings.DUETIME`` (the database defaults to Django's own PostgreSQL
database), one lazily created :class:`duetime.App` serves the process (``duetime_app``), handlers
are registered with :func:`handler` in each installed app's ``duetime_handlers`` module, and
``manage.py duetime_migrate`` / ``manage.py duetime_worker`` migrate and work. See
docs/django.md.
"""

from __future__ import annotations

from duetime.contrib.django.runtime import close_app, duetime_app, get_app, handler

__all__ = ["close_app", "duetime_app", "get_app", "handler"]
