"""The gunicorn worker class the web server runs (``-k config.workers.UvicornWorker``)."""

from __future__ import annotations

from typing import Any

from uvicorn_worker import UvicornWorker as _UvicornWorker


class UvicornWorker(_UvicornWorker):
    """uvicorn's gunicorn worker without per-message compression of WebSocket frames.

    Every waiting page gets the same tick each second; compressed, it was compressed again
    for every socket, which cost more CPU than sending it (docs/benchmarks.md). A tick is
    about a kilobyte a second per fan uncompressed.
    """

    CONFIG_KWARGS: dict[str, Any] = {
        **_UvicornWorker.CONFIG_KWARGS,
        "ws_per_message_deflate": False,
    }
