"""The facade's methods that moved to its parts, kept working: ``app.add_schedule(...)`` is
``app.schedules.add(...)`` and says so once, with a ``DeprecationWarning`` naming the new
spelling at the caller's line.

:func:`relay` hands a facade's verb to its part unchanged (``app.schedule`` is
``app.timers.schedule``); :func:`moved` does the same and warns. Both keep the part method's
signature and docstring, so ``help()``, editors and type checkers see the real parameters.
"""

from __future__ import annotations

import functools
import types
import warnings
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

P = ParamSpec("P")
R = TypeVar("R")


def warn_moved(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``app.{old}`` is now ``app.{new}``, at the line that called it."""
    warnings.warn(
        f"app.{old} is deprecated: use app.{new}", DeprecationWarning, stacklevel=stacklevel
    )


class _Relay:
    """A facade method that calls the method of the same name on one of the facade's parts."""

    def __init__(self, method: Callable[..., Any], part: str, *, deprecated: bool) -> None:
        functools.update_wrapper(self, method)
        self._part, self._name, self._deprecated = part, method.__name__, deprecated

    def __set_name__(self, owner: type, name: str) -> None:
        self.__name__ = name
        self.__qualname__ = f"{owner.__name__}.{name}"

    def __get__(self, app: object, owner: type | None = None) -> Any:
        return self if app is None else types.MethodType(self, app)

    def __call__(self, app: object, /, *args: Any, **kwargs: Any) -> Any:
        if self._deprecated:
            warn_moved(f"{self.__name__}()", f"{self._part}.{self._name}()")
        return getattr(getattr(app, self._part), self._name)(*args, **kwargs)

    @property
    def moved_to(self) -> str | None:
        """``part.method`` when this is a deprecated spelling of it."""
        return f"{self._part}.{self._name}" if self._deprecated else None


def relay(method: Callable[Concatenate[Any, P], R], part: str) -> Callable[Concatenate[Any, P], R]:
    """The facade's ``method`` of its ``part`` (``schedule = relay(Timers.schedule, "timers")``)."""
    return cast(Callable[Concatenate[Any, P], R], _Relay(method, part, deprecated=False))


def moved(method: Callable[Concatenate[Any, P], R], part: str) -> Callable[Concatenate[Any, P], R]:
    """A deprecated facade method, now ``app.{part}.{method}``: it warns, then calls that."""
    return cast(Callable[Concatenate[Any, P], R], _Relay(method, part, deprecated=True))
