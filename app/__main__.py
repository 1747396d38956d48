"""`python -m app`: start the service with uvicorn and point at (or open) the console."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import webbrowser

import uvicorn

from app.settings import Settings


def _has_display() -> bool:
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def main() -> None:
    s = Settings()
    parser = argparse.ArgumentParser(prog="python -m app", description="Start the tensormapper service.")
    parser.add_argument("--host", default=s.host, help="interface to bind (env TM_HOST)")
    parser.add_argument("--port", type=int, default=s.port, help="port to bind (env TM_PORT)")
    parser.add_argument("--no-browser", action="store_true", help="do not open the console in a browser")
    args = parser.parse_args()
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    url = f"http://{shown}:{args.port}/docs"
    print(f"tensormapper console: {url} (storage: {s.storage})", flush=True)
    if not args.no_browser and _has_display():
        threading.Timer(1.5, webbrowser.open, args=(url,)).start()
    uvicorn.run("app.main:app", host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
