"""A test runner that lets Django drop its test database: duetime's connections close first.

``TEST_RUNNER = "duetime.contrib.django.runner.DiscoverRunner"``. Django's runner drops the test
database at the end, which PostgreSQL refuses while any other session is connected to it — and
duetime's app, following the runner to that database, keeps a pool there. (A runner of your own:
call :func:`duetime.contrib.django.close_app` before its ``teardown_databases``; pytest-django:
in a session fixture's teardown.)
"""

from __future__ import annotations

from typing import Any

from django.test.runner import DiscoverRunner as DjangoDiscoverRunner

from duetime.contrib.django.runtime import close_app


class DiscoverRunner(DjangoDiscoverRunner):
    """Django's own runner, closing duetime's app before the test databases are dropped."""

    def teardown_databases(self, old_config: Any, **kwargs: Any) -> None:
        close_app()
        super().teardown_databases(old_config, **kwargs)
