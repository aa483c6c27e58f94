"""``manage.py duetime_worker``: the worker for the handlers registered in this project."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from duetime.contrib.django.runtime import get_app


class Command(BaseCommand):
    help = (
        "Run duetime's worker for this project's handlers (each installed app's "
        "duetime_handlers module and DUETIME['HANDLERS']) until SIGINT or SIGTERM; in-flight "
        "handlers finish first."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        app = get_app()
        types = app.core.registry.types
        serving = ", ".join(types) if types else "no handlers registered"
        self.stdout.write(f"duetime worker on namespace {app.namespace!r}: {serving}")
        self.stdout.flush()
        stats = app.run_worker()
        self.stdout.write(f"stopped after {stats.claimed} claimed")
