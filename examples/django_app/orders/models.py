from __future__ import annotations

from django.db import models


class Order(models.Model):
    email = models.EmailField()
    placed_at = models.DateTimeField(auto_now_add=True)
    followed_up_at = models.DateTimeField(null=True, blank=True)
    """Set by the ``order.follow_up`` handler, in the transaction that completes its timer."""

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.pk,
            "email": self.email,
            "placed_at": self.placed_at.isoformat(),
            "followed_up_at": self.followed_up_at and self.followed_up_at.isoformat(),
        }
