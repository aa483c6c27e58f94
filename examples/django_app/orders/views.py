"""Placing an order and scheduling its follow-up in one atomic block: both or neither."""

from __future__ import annotations

import json

from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods

from duetime import InvalidInput
from duetime.contrib.django import duetime_app

from .models import Order

FOLLOW_UP = "order.follow_up"


@csrf_exempt
@require_http_methods(["GET", "POST"])
def orders(request: HttpRequest) -> JsonResponse:
    """POST ``{"email": …, "follow_up": "P15D"}``: the order, and its follow-up timer due after
    ``follow_up`` (an ISO 8601 duration), stored in the same transaction. GET: the orders."""
    if request.method == "GET":
        return JsonResponse({"items": [o.to_dict() for o in Order.objects.order_by("id")]})
    body = json.loads(request.body or b"{}")
    try:
        with transaction.atomic():
            order = Order.objects.create(email=body.get("email", ""))
            timer = duetime_app.schedule(
                FOLLOW_UP,
                {"order": order.pk},
                delay=body.get("follow_up", "P15D"),
                key=f"order:{order.pk}:follow-up",
                subject=order.email,
                transaction=connection,  # visible once this block commits, gone if it rolls back
            ).timer
    except InvalidInput as exc:  # e.g. a bad follow_up: the order is rolled back too
        return JsonResponse(exc.to_dict(), status=400)
    answer = {**order.to_dict(), "follow_up": {"key": timer.key, "due_at": timer.due_at}}
    return JsonResponse(answer, status=201)


@require_GET
def order(request: HttpRequest, order_id: int) -> JsonResponse:
    return JsonResponse(get_object_or_404(Order, pk=order_id).to_dict())
