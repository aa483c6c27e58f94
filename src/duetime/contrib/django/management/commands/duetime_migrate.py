"""``manage.py duetime_migrate``: duetime's schema migrations, as ``duetime migrate`` runs them."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from duetime.contrib.django.runtime import get_app


class Command(BaseCommand):
    help = (
        "Apply duetime's pending schema migrations (its tables live in their own schema, beside "
        "Django's) and print the schema version."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        applied, version = get_app().migrate()
        listed = ", ".join(map(str, applied)) if applied else "none (up to date)"
        self.stdout.write(f"schema version {version}; applied now: {listed}")
