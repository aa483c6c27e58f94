from __future__ import annotations

from django.db import models


class Note(models.Model):
    text = models.TextField()
    closed = models.BooleanField(default=False)
