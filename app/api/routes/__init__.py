"""One router per resource, each mounted under /v1 (metrics at /metrics)."""
