"""The gunicorn worker class the web server runs (``-k config.workers.UvicornWorker``)."""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from uvicorn_worker import UvicornWorker as _UvicornWorker

from queueing.observability import observability_setup

# The server reads its own settings before the application (config/asgi.py) is loaded.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def uvicorn_config() -> dict[str, Any]:
    """What the worker changes in uvicorn's configuration (read from Django's settings)."""
    return {
        # Every waiting page gets the same tick each second; compressed, it was compressed
        # again for every socket, which cost more CPU than sending it (docs/benchmarks.md). A
        # tick is about a kilobyte a second per fan uncompressed.
        "ws_per_message_deflate": False,
        # uvicorn's default is 16 MiB per client message, buffered before the application sees
        # any of it; the page sends nothing, so a big message is someone holding memory.
        "ws_max_size": settings.WR_WS_MAX_MESSAGE_BYTES,
        # One rule for the client's address and scheme, the room's (WR_TRUSTED_PROXY_COUNT,
        # DJANGO_BEHIND_TLS_PROXY). uvicorn's own would believe X-Forwarded-For and -Proto
        # from any peer on loopback (gunicorn's --forwarded-allow-ips), whatever those say.
        "proxy_headers": False,
        "ws_ping_interval": settings.WR_WS_PING_SECONDS,
    }


class UvicornWorker(_UvicornWorker):
    """uvicorn's gunicorn worker without per-message compression of WebSocket frames, with a
    small limit on what a client may send over one, without uvicorn's proxy headers, and
    with the room's tracing and error reports set up (queueing/observability.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Read here, in the worker, rather than at import in gunicorn's master.
        self.CONFIG_KWARGS = {**_UvicornWorker.CONFIG_KWARGS, **uvicorn_config()}
        super().__init__(*args, **kwargs)

    def init_process(self) -> None:
        # After the fork, before the application is loaded: Django's instrumentation must
        # be in place before config/asgi.py builds Django's handler and its middleware.
        observability_setup(service="web")
        super().init_process()
