"""The Django application: importing each installed app's ``duetime_handlers`` on start."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules

from duetime.contrib.django.conf import handler_modules

HANDLERS_MODULE = "duetime_handlers"
"""Imported from every installed app at start, like ``admin``: where its handlers live."""


class DuetimeConfig(AppConfig):
    """Registers the project's duetime handlers; it has no models of its own (duetime's tables
    live in duetime's schema and are migrated by ``manage.py duetime_migrate``)."""

    name = "duetime.contrib.django"
    label = "duetime"
    verbose_name = "duetime"
    default = True

    def ready(self) -> None:
        import importlib

        autodiscover_modules(HANDLERS_MODULE)
        for module in handler_modules():
            importlib.import_module(module)
