"""The blocking App's methods document themselves like the AsyncApp's they wrap."""

from __future__ import annotations

import inspect

from duetime import App


def test_the_blocking_app_shows_each_methods_own_parameters() -> None:
    parameters = inspect.signature(App.schedule).parameters
    assert list(parameters)[:3] == ["self", "type", "payload"]
    assert {"delay", "at", "key", "timezone"} <= set(parameters)
    assert App.schedule.__doc__
    assert App.schedule.__qualname__ == "App.schedule"
