"""``manage.py duetime_migrate``: duetime's schema migrations, as ``duetime migrate`` runs them."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from duetime.contrib.django.runtime import get_app


class Command(BaseCommand):
    help = (
        "Apply duetime's pending schema migrations (its tables live in their own schema, beside "
        "Django's), create the project's namespace, and print the schema version."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        app = get_app()
        applied, version = app.migrate()
        app.close()  # opened for migrating only: opening it again creates its namespace
        app.open()  # (DUETIME["NAMESPACE"]), so the API and dashboard find it at once
        listed = ", ".join(map(str, applied)) if applied else "none (up to date)"
        self.stdout.write(f"schema version {version}; applied now: {listed}")
        self.stdout.write(f"namespace {app.namespace!r} ready")
