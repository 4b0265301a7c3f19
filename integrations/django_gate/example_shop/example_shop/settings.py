"""A tiny shop behind the waiting room, for the gate's tests and as an example to copy.

It has no database: the gate needs none. The room and the on-sale come from the environment
so that tests can point it at the room they started.
"""

import os

SECRET_KEY = os.environ.get("SHOP_SECRET_KEY", "example-shop-not-secret")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "[::1]", "localhost", "testserver"]
ROOT_URLCONF = "example_shop.urls"
WSGI_APPLICATION = "example_shop.wsgi.application"
INSTALLED_APPS: list[str] = []
DATABASES: dict[str, dict[str, str]] = {}
USE_TZ = True

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Early, so that fans without a pass cost the shop nothing more than this check.
    "waitingroom_gate.middleware.WaitingRoomGateMiddleware",
    "django.middleware.common.CommonMiddleware",
]

WAITING_ROOM = {
    "URL": os.environ.get("SHOP_ROOM_URL", "http://127.0.0.1:8000"),
    "EVENT": os.environ.get("SHOP_EVENT", "demo"),
    "EXEMPT_PATHS": ["/static/", "/healthz", "/webhooks/"],
    "COOKIE_NAME": "shop_wr_pass",
    "JWKS_MIN_REFETCH_SECONDS": float(os.environ.get("SHOP_JWKS_MIN_REFETCH_SECONDS", "10")),
    "ONLINE_CHECK": os.environ.get("SHOP_ONLINE_CHECK", "") == "1",
    "ONLINE_CHECK_CACHE_SECONDS": float(os.environ.get("SHOP_ONLINE_CHECK_CACHE_SECONDS", "10")),
    "JWKS_CACHE_SECONDS": float(os.environ.get("SHOP_JWKS_CACHE_SECONDS", "300")),
    "JWKS_STALE_SECONDS": float(os.environ.get("SHOP_JWKS_STALE_SECONDS", "86400")),
    # The on-sale's integration key (the room's staff API shows it): with it, the gate applies
    # the on-sale's traffic rules; without it, every request queues.
    "INTEGRATION_KEY": os.environ.get("SHOP_INTEGRATION_KEY") or None,
    "RULES_CACHE_SECONDS": float(os.environ.get("SHOP_RULES_CACHE_SECONDS", "10")),
    # One proxy (a load balancer, nginx) in front of the shop that writes X-Forwarded-For.
    "TRUSTED_PROXY_COUNT": int(os.environ.get("SHOP_TRUSTED_PROXY_COUNT", "0")),
    "FAIL_OPEN_MINUTES": float(os.environ.get("SHOP_FAIL_OPEN_MINUTES", "0")),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"waitingroom_gate": {"handlers": ["console"], "level": "INFO"}},
}
