"""The shop's duetime handlers: found by ``duetime.contrib.django`` at start, run by
``manage.py duetime_worker``."""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone

from duetime import Event
from duetime.contrib.django import handler

from .models import Order

log = logging.getLogger("orders")


@handler("order.follow_up", transactional=True)
def follow_up(event: Event, connection: Any) -> None:
    """Marks the order followed up in the transaction that completes the timer: if anything
    here raises, the ORM's writes roll back and the timer is retried, so it happens once."""
    assert isinstance(event.payload, dict)
    order = Order.objects.select_for_update().get(pk=event.payload["order"])
    order.followed_up_at = timezone.now()
    order.save(update_fields=["followed_up_at"])
    log.info("followed up order %s (%s), attempt %d", order.pk, order.email, event.attempt)
