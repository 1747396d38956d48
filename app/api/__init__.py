"""The HTTP layer: routers per resource, dependencies, RFC 9457 error responses, OpenAPI examples."""
