"""HTTP (Django) and, from the live-updates issue on, WebSockets (Channels)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Django must be set up before anything that imports models (consumers, routing).
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402

if settings.WR_SERVE_STATIC:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    # Admin styles without a separate static server; production puts a CDN in front.
    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

from channels.routing import ProtocolTypeRouter  # noqa: E402

application = ProtocolTypeRouter({"http": django_asgi_app})
