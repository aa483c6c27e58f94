"""The shop's own tests, run by Django's test runner (``manage.py test orders``): duetime
follows it to the test database."""

from __future__ import annotations

import json

from django.test import TestCase, TransactionTestCase

from duetime import NotFound, Status
from duetime.contrib.django import duetime_app

from .models import Order


class PlacingAnOrder(TestCase):
    """Each test one transaction, rolled back: what the view scheduled goes with it."""

    def test_the_follow_up_is_scheduled_in_the_orders_transaction(self) -> None:
        answer = self.client.post(
            "/orders/", json.dumps({"email": "ada@example.com"}), content_type="application/json"
        )
        self.assertEqual(answer.status_code, 201)
        key = answer.json()["follow_up"]["key"]
        # Not committed yet (the test's transaction): duetime's own connections cannot see it.
        with self.assertRaises(NotFound):
            duetime_app.get(key)

    def test_a_bad_follow_up_leaves_no_order(self) -> None:
        answer = self.client.post(
            "/orders/",
            json.dumps({"email": "bob@example.com", "follow_up": "soon"}),
            content_type="application/json",
        )
        self.assertEqual((answer.status_code, answer.json()["field"]), (400, "delay"))
        self.assertFalse(Order.objects.exists())


class FollowingUp(TransactionTestCase):
    """Committed for real, so a worker (here ``tick``: what is due, once) sees the timer."""

    def test_the_handler_marks_the_order_in_the_timers_transaction(self) -> None:
        answer = self.client.post(
            "/orders/",
            json.dumps({"email": "ada@example.com", "follow_up": "PT0S"}),
            content_type="application/json",
        )
        order_id, key = answer.json()["id"], answer.json()["follow_up"]["key"]
        duetime_app.tick()
        self.assertIsNotNone(Order.objects.get(pk=order_id).followed_up_at)
        self.assertEqual(duetime_app.get(key).status, Status.DONE)
