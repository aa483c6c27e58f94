"""Background duties a worker runs beside claiming timers, one per module."""
