"""One page of a listing: what every cursor-paginated read returns (the cursors' texts are in
:mod:`duetime.model.cursors`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing; pass ``next_cursor`` back to get the next one (None at the end).
    ``cursor_of`` (when the listing gives it) is the cursor after any one item, so a page can
    end early (:meth:`ended_after`) and the next one start where it ended."""

    items: list[T] = field(default_factory=list)
    next_cursor: str | None = None
    cursor_of: Callable[[T], str] | None = field(default=None, compare=False, repr=False)

    def ended_after(self, count: int) -> Page[T]:
        """The first ``count`` items, with the cursor after the last of them (the same page
        when it has no more, or no way to continue from an item)."""
        if count >= len(self.items) or count < 1 or self.cursor_of is None:
            return self
        kept = self.items[:count]
        return Page(kept, self.cursor_of(kept[-1]), self.cursor_of)
