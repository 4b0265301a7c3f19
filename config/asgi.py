"""HTTP (Django) and WebSockets (Channels)."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Django must be set up before anything that imports models (consumers, routing).
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from queueing.web.edge_figures import figures_sampler_start  # noqa: E402
from queueing.web.hot_paths import HotPaths  # noqa: E402
from queueing.web.request_ids import RequestIds  # noqa: E402
from queueing.web.request_limits import RequestLimits  # noqa: E402
from queueing.web.routing import websocket_urlpatterns  # noqa: E402

if settings.WR_SERVE_STATIC:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
    from django.contrib.staticfiles.storage import ManifestFilesMixin, staticfiles_storage
    from django.core.exceptions import SuspiciousFileOperation
    from django.http import Http404, HttpRequest, HttpResponse
    from django.views.static import serve as serve_collected

    # With DEBUG off (config/settings.py, STORAGES) pages name files by their content's hash:
    # the manifest's names, served from collectstatic's output. None: files keep their names.
    hashed_names: frozenset[str] | None = (
        frozenset(staticfiles_storage.hashed_files.values())
        if isinstance(staticfiles_storage, ManifestFilesMixin)
        else None
    )

    class StaticFiles(ASGIStaticFilesHandler):
        """Static files without a separate server; production puts nginx or a CDN in front.
        Files named by their hash come from collectstatic's output and may be kept a year
        (such a name never changes what it holds); otherwise from the apps' directories. A
        path that leads out of the static directories (``/static/../manage.py``) is a file
        that is not there, 404, rather than the 500 of Django's SuspiciousFileOperation."""

        def serve(self, request: HttpRequest) -> HttpResponse:
            try:
                if hashed_names is None:
                    return super().serve(request)
                name = self.file_path(request.path)
                response = serve_collected(request, name, document_root=settings.STATIC_ROOT)
            except SuspiciousFileOperation as exc:
                raise Http404("No such static file.") from exc
            if name in hashed_names:
                response["Cache-Control"] = "public, max-age=31536000, immutable"
            return response

    django_asgi_app = StaticFiles(django_asgi_app)

# In front of everything, the request's id (queueing/web/request_ids.py), then a cap on what a
# request may make the room read (a body sent chunked included: queueing/web/request_limits.py);
# then ticket status and joins take a lean path in front of Django (queueing/web/hot_paths.py).
application = RequestIds(
    RequestLimits(
        HotPaths(
            ProtocolTypeRouter(
                {
                    "http": django_asgi_app,
                    "websocket": AllowedHostsOriginValidator(URLRouter(websocket_urlpatterns)),
                }
            )
        )
    )
)

# This process's pools, sampled for /metrics every few seconds (queueing/web/edge_figures.py).
figures_sampler_start()

# Everything loaded so far (Django, the project, its libraries) lives as long as the process:
# keep it out of the cyclic collector's full passes, which would otherwise walk it all and
# stall every request of this worker (seen as the status path's p99 in the benchmark).
gc.freeze()
# And collect the young generation less often: a worker holding thousands of sockets creates
# objects by the hundred thousand, and each full pass over them stalled every socket's tick.
gc.set_threshold(50_000, 20, 100)
