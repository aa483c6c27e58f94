"""Re-exports that import their module on first use, so ``import duetime`` stays cheap.

A package lists ``name -> module`` and hands :func:`exports` its ``__name__``; the returned
``__getattr__``/``__dir__`` pair (PEP 562) imports the module the first time a name is read and
caches the value in the package, so later reads cost nothing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, which re-exports ``names``."""

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
