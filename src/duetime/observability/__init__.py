"""What duetime tells operators: Prometheus metrics, OpenTelemetry spans and its log format."""
