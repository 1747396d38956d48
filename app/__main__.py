"""`python -m app` is `mapper serve`: the API (console at /docs) and its workers.

Takes the same flags (`--host`, `--port`, `--no-browser`, `--storage`, `--workers`, ...), each
over its ``TM_*`` environment variable.
"""

from __future__ import annotations

import sys

from app.cli import main

if __name__ == "__main__":
    main(["serve", *sys.argv[1:]], prog_name="python -m app")
