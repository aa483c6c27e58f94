"""The shop's ASGI application: Django, with duetime's API and dashboard under ``/duetime``.

``.venv/bin/uvicorn --app-dir examples/django_app shopsite.asgi:application``
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
django_application = get_asgi_application()  # sets Django up before duetime reads its settings

from duetime.contrib.django.asgi import with_duetime  # noqa: E402

application = with_duetime(django_application, prefix="/duetime")
