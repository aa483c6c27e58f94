from __future__ import annotations

from django.urls import path
from orders import views

urlpatterns = [
    path("orders/", views.orders, name="orders"),
    path("orders/<int:order_id>/", views.order, name="order"),
]
