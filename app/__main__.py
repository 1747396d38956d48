"""`python -m app`: start the service with uvicorn."""

from __future__ import annotations

import argparse

import uvicorn

from app.settings import Settings


def main() -> None:
    s = Settings()
    parser = argparse.ArgumentParser(prog="python -m app", description="Start the tensormapper service.")
    parser.add_argument("--host", default=s.host)
    parser.add_argument("--port", type=int, default=s.port)
    args = parser.parse_args()
    print(f"tensormapper console: http://{args.host}:{args.port}/docs (storage: {s.storage})", flush=True)
    uvicorn.run("app.main:app", host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
