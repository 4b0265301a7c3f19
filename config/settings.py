"""Settings for every environment, read from the environment.

Defaults work on a developer machine (PostgreSQL and Redis on 127.0.0.1); production sets
``DJANGO_DEBUG=0`` and real secrets. Nothing exists only in a production file.

Over 350 lines on purpose: every setting the room reads, with why it has its default, is
found in this one file.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from config.env import (
    database_from_url,
    database_options,
    env_bool,
    env_float,
    env_group_map,
    env_int,
    env_list,
    env_secret,
    env_str,
    fernet_key_derived,
    fernet_keys_checked,
    networks_checked,
)
from config.logs import logging_from_env
from config.version import VERSION

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DJANGO_DEBUG", True)
_DEV_SECRET = "dev-only-insecure-secret-key-change-me-0123456789abcdefghijklmnop"
SECRET_KEY = env_secret("DJANGO_SECRET_KEY", _DEV_SECRET if DEBUG else "")
if not SECRET_KEY:
    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off")
# Rotating the secret key: the old one moves here, so that what it signed or sealed (tickets,
# identity cookies, sessions, proof-of-work challenges) still reads until it is dropped
# (docs/configuration.md, "Rotating the secret key"). Comma-separated, or one a line in a file.
SECRET_KEY_FALLBACKS = [
    key.strip()
    for key in re.split(r"[,\n]", env_secret("DJANGO_SECRET_KEY_FALLBACKS", ""))
    if key.strip()
]
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
# The public base URL of the room: the `iss` of passes and the root of absolute links. By
# default the address `make run` binds (BIND, scripts/run_stack.sh), so a second demo on
# another port links to itself, not to the first.
_BIND = env_str("BIND", "127.0.0.1:8000")
WR_PUBLIC_URL = env_str(
    "WR_PUBLIC_URL", "http://127.0.0.1:8000" if _BIND.startswith("unix:") else f"http://{_BIND}"
).rstrip("/")

INSTALLED_APPS = [
    # Django's admin on our site: its login (also the dashboard's) is throttled.
    "dashboard.admin_app.WaitingRoomAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # intcomma: the fans' figures grouped as their language groups thousands.
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI's files, served by the room itself for the staff's API reference: the pages'
    # Content-Security-Policy allows scripts from 'self' only (dashboard/api_reference.py).
    "drf_spectacular_sidecar",
    "channels",
    "events",
    "staff",
    "queueing",
    "dashboard",
]

# django-prometheus times and counts the requests Django serves (the lean paths of
# queueing/web/hot_paths.py answer in front of Django and have histograms of their own), and
# its database and cache backends below count queries and cache hits: /metrics exports them.
MIDDLEWARE = [
    # First: every line Django logs for the request carries its id (the lean paths and the
    # ASGI application get theirs from queueing.web.request_ids.RequestIds).
    "queueing.web.request_ids.RequestIdMiddleware",
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "queueing.web.middleware.ContentSecurityPolicyMiddleware",
    "queueing.web.middleware.ApiErrorMiddleware",
    "queueing.web.middleware.NulInputMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(
        env_secret("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/waitingroom")
    )
}
# Under ASGI every request runs its sync code in a thread of its own, so per-thread persistent
# connections would pile up: a bounded psycopg pool per process instead.
_DB_POOL_MAX = env_int("DATABASE_POOL_MAX", 16, minimum=0)
DATABASES["default"]["CONN_MAX_AGE"] = 0
# A connection is checked before it is handed out (with the pool: on every checkout, one empty
# query), so that after PostgreSQL restarts a process opens a fresh one rather than failing
# a request or a tick on each of the dead ones it kept.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = env_bool("DATABASE_HEALTH_CHECKS", True)
# The room's own connection options; DATABASE_URL's query string (sslmode, options...) goes
# over them (config/env.py, database_options).
DATABASES["default"]["OPTIONS"] = database_options(
    DATABASES["default"]["OPTIONS"],
    {
        # Fail fast when PostgreSQL is unreachable instead of hanging a request.
        "connect_timeout": env_int("DATABASE_CONNECT_TIMEOUT", 3, minimum=1),
        # A process stuck inside a transaction (a hung Redis call under an admission lock) must
        # not hold row and advisory locks forever.
        "options": "-c idle_in_transaction_session_timeout="
        + str(env_int("DATABASE_IDLE_IN_TRANSACTION_MS", 30_000, minimum=1000)),
    },
)
if _DB_POOL_MAX:
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": 1,
        "max_size": _DB_POOL_MAX,
        # How long a request waits for a free connection before answering 503.
        "timeout": env_float("DATABASE_POOL_TIMEOUT", 10.0, minimum=0.1),
    }
# Django's PostgreSQL backend with django-prometheus's counts of queries, errors and
# connections opened (django_db_*). Measured on the 2-core machine with
# PROMETHEUS_MULTIPROC_DIR set: about 30 us more per query (20,000 one-row queries, farm-bench,
# median of 7 pairs), which a join batch (a dozen queries for up to WR_JOIN_BATCH_MAX joins)
# and a tick hardly see; a status poll on the lean path runs none.
DATABASES["default"]["ENGINE"] = "django_prometheus.db.backends.postgresql"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_secret("REDIS_URL", "redis://127.0.0.1:6379/0")
# REDIS_CLUSTER=1: the hot index is on a Redis Cluster and REDIS_URL lists seed nodes,
# comma-separated (queueing/hot/cluster.py). The channel layer's pub/sub then needs a plain
# Redis of its own (CHANNELS_REDIS_URL), and Celery a broker (CELERY_BROKER_URL).
REDIS_CLUSTER = env_bool("REDIS_CLUSTER", False)
CHANNELS_REDIS_URL = env_secret("CHANNELS_REDIS_URL", "" if REDIS_CLUSTER else REDIS_URL)
if not CHANNELS_REDIS_URL:
    raise ImproperlyConfigured(
        "CHANNELS_REDIS_URL must name a plain Redis when REDIS_CLUSTER is on: the channel "
        "layer's pub/sub does not run on a cluster"
    )
# Every hot-index key, and (below) the channel layer's groups, start with this prefix; tests
# give each test its own. Rooms sharing a Redis must not share it: by default it names the
# room's database (the first room's, `waitingroom`, keeps the plain `wr`), so two rooms with
# their own databases keep their lines and live updates apart (queueing/checks.py refuses a
# prefix another database claimed).
_DATABASE_NAME = re.sub(r"[^A-Za-z0-9_-]", "_", DATABASES["default"]["NAME"])
WR_REDIS_PREFIX = env_str(
    "WR_REDIS_PREFIX", "wr" if _DATABASE_NAME == "waitingroom" else f"wr-{_DATABASE_NAME}"
)
_REDIS_TIMEOUT = env_float("REDIS_SOCKET_TIMEOUT", 1.0, minimum=0.05)
# Joins committed together by the lean join path (group commit), at most.
WR_JOIN_BATCH_MAX = env_int("WR_JOIN_BATCH_MAX", 200, minimum=1)
# How long the lean join path lets a batch gather from its first join before committing it
# (unless it is full first): 0 commits at once. Where an on-sale's joins reach many web
# processes, each process's batches are small and its parts hold a lane's chain head for a
# join or two each; lingering makes the parts whole (docs/scaling.md).
WR_JOIN_LINGER_MS = env_int("WR_JOIN_LINGER_MS", 0, minimum=0)
# The lean ASGI status path's own Redis connections, per web process.
WR_ASYNC_REDIS_MAX_CONNECTIONS = env_int("WR_ASYNC_REDIS_MAX_CONNECTIONS", 500, minimum=1)
# Joins waiting for a batch on the lean join path, per web process, at most: one more is
# refused at once with 503 unavailable and Retry-After (it would only wait to be refused).
WR_JOIN_QUEUE_MAX = env_int("WR_JOIN_QUEUE_MAX", 2000, minimum=1)
# How long a lean join may wait for its batch to start committing: as long as a join through
# Django waits for a pool connection (DATABASE_POOL_TIMEOUT) before its 503. Past it, the join
# is refused with 503 and never committed.
WR_JOIN_QUEUE_DEADLINE_SECONDS = env_float(
    "WR_JOIN_QUEUE_DEADLINE_SECONDS",
    env_float("DATABASE_POOL_TIMEOUT", 10.0, minimum=0.1),
    minimum=0.1,
)
CACHES = {
    "default": {
        # django-redis's cache, counting its hits and misses (django_cache_*).
        "BACKEND": "django_prometheus.cache.backends.redis.RedisCache",
        # One location even for a cluster: django-redis reads several as a master and its
        # read replicas; the cluster client takes all the seeds from CLUSTER_SEEDS.
        "LOCATION": REDIS_URL.split(",")[0],
        "KEY_PREFIX": f"{WR_REDIS_PREFIX}:cache",
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.DefaultClient",
            **(
                {
                    "CONNECTION_FACTORY": "queueing.hot.cluster.ClusterConnectionFactory",
                    "CLUSTER_SEEDS": REDIS_URL,
                }
                if REDIS_CLUSTER
                else {}
            ),
            # Joins and status reads must not hang when Redis is gone: they degrade to PostgreSQL.
            "SOCKET_CONNECT_TIMEOUT": _REDIS_TIMEOUT,
            "SOCKET_TIMEOUT": _REDIS_TIMEOUT,
            "CONNECTION_POOL_KWARGS": {
                "max_connections": env_int("REDIS_MAX_CONNECTIONS", 200, minimum=1),
                "retry_on_timeout": False,
            },
        },
    }
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {
            # redis-py 8 with channels-redis 4.3 drops idle sockets every few seconds unless
            # the socket timeout is disabled and the pool size is explicit.
            "hosts": [
                {
                    "address": CHANNELS_REDIS_URL,
                    "socket_timeout": None,
                    "max_connections": env_int("CHANNELS_REDIS_MAX_CONNECTIONS", 100, minimum=1),
                }
            ],
            # Pub/sub channels ignore Redis database numbers: rooms sharing a Redis need
            # distinct prefixes.
            "prefix": env_str("CHANNELS_PREFIX", f"{WR_REDIS_PREFIX}:asgi"),
        },
    }
}

# The broker. Production runs RabbitMQ (amqp://): admission then keeps going while the
# hot-index Redis is down. The default, that same Redis, is for one developer machine; a
# Redis Cluster cannot be one, so with REDIS_CLUSTER on it must be named.
CELERY_BROKER_URL = env_secret("CELERY_BROKER_URL", "" if REDIS_CLUSTER else REDIS_URL)
if not CELERY_BROKER_URL:
    raise ImproperlyConfigured(
        "CELERY_BROKER_URL must be set when REDIS_CLUSTER is on (RabbitMQ: amqp://...)"
    )
# On RabbitMQ this queue, and a direct exchange of the same name, are durable: they outlive
# every process, so a name used only for a while (a test's) must be deleted afterwards.
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "waitingroom")
# A message is acknowledged when its task ends; if the worker dies first, the broker hands it
# to another (RabbitMQ: when the dead worker's channel closes). Every task is safe to run twice.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# When the worker loses the broker, its unacknowledged messages go back to the queue anyway:
# stop their running copies rather than run each twice (Celery 6's default).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
# One unacknowledged message per worker process: a tick never waits behind a slow task that a
# busy process took in advance.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
# Celery's Django fix-up closes a worker's database connections before and after every task,
# and with a pool it closes the pool itself: every tick then opened new connections (about
# five for a busy on-sale's). It does so only every CELERY_DB_REUSE_MAX tasks instead (0: after
# every task, the fix-up's default); between tasks config/celery.py hands the connection back
# to the pool, which keeps it open, checks it before handing it out again, and renews it
# within the hour (psycopg_pool's max_lifetime).
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 1_000_000, minimum=0)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The room ticks once a second: the beat sends each on-sale with work its own tick
# (queueing/beat.py). A tick not started within WR_TICK_STALE_SECONDS is dropped (a newer one
# has been sent), so workers that fall behind never face a backlog. A message's `expires` is
# also its time to live on RabbitMQ, which drops it unread; on Redis the worker discards it.
WR_TICK_SECONDS = env_float("WR_TICK_SECONDS", 1.0, minimum=0.2)
WR_TICK_STALE_SECONDS = env_float("WR_TICK_STALE_SECONDS", 2 * WR_TICK_SECONDS, minimum=0.5)
# Retention (docs/operations.md, "Retention and archives"). An on-sale ended more than
# WR_RETENTION_DAYS ago is archived to a file in WR_ARCHIVE_DIR and leaves the database; 0
# (the default) archives nothing by itself: the file is then the trail's only copy, so the
# directory must be on storage that is kept and backed up before it is turned on (a
# commercial room would keep about 90 days).
WR_RETENTION_DAYS = env_int("WR_RETENTION_DAYS", 0, minimum=0)
WR_ARCHIVE_DIR = env_str("WR_ARCHIVE_DIR", str(BASE_DIR / "archives"))
# On-sales archived per retention run (each one's rows are read and removed in batches).
WR_RETENTION_PER_RUN = env_int("WR_RETENTION_PER_RUN", 2, minimum=1)
WR_RETENTION_CHECK_SECONDS = env_float("WR_RETENTION_CHECK_SECONDS", 3600.0, minimum=60.0)
# Staff login lockouts (who, from which address) are kept this long after they ended.
WR_LOGIN_LOCKOUT_KEEP_DAYS = env_int("WR_LOGIN_LOCKOUT_KEEP_DAYS", 30, minimum=0)

# Webhooks (docs/api.md, "Webhooks"; docs/operations.md, "Webhooks"). A delivery is tried
# WR_WEBHOOK_ATTEMPTS times, WR_WEBHOOK_RETRY_SECONDS after the first failure and twice as long
# after each next one (10 and 180 s: about a day), each attempt given WR_WEBHOOK_TIMEOUT_SECONDS.
WR_WEBHOOK_TIMEOUT_SECONDS = env_float("WR_WEBHOOK_TIMEOUT_SECONDS", 5.0, minimum=0.1)
WR_WEBHOOK_ATTEMPTS = env_int("WR_WEBHOOK_ATTEMPTS", 10, minimum=1)
WR_WEBHOOK_RETRY_SECONDS = env_float("WR_WEBHOOK_RETRY_SECONDS", 180.0, minimum=0.1)
# An endpoint whose attempts failed this many times in a row is turned off, with the reason.
WR_WEBHOOK_DISABLE_AFTER = env_int("WR_WEBHOOK_DISABLE_AFTER", 20, minimum=1)
# How often the beat looks for deliveries due (retries, and first attempts whose task was lost).
WR_WEBHOOK_SWEEP_SECONDS = env_float("WR_WEBHOOK_SWEEP_SECONDS", 5.0, minimum=0.5)
# Plain http:// endpoints (on by default only with DEBUG on).
WR_WEBHOOK_ALLOW_HTTP = env_bool("WR_WEBHOOK_ALLOW_HTTP", DEBUG)
# Networks an endpoint may reach although they are not public (loopback, private, link-local:
# a webhook must not become a way to call the room's own network). Comma-separated CIDRs;
# with DEBUG on, every address.
WR_WEBHOOK_ALLOWED_NETWORKS = networks_checked(
    "WR_WEBHOOK_ALLOWED_NETWORKS",
    env_list("WR_WEBHOOK_ALLOWED_NETWORKS", ["0.0.0.0/0", "::/0"] if DEBUG else []),
)

# The room's scheduler (queueing/scheduler.py, `manage.py room_scheduler`, two or more
# replicas) sends CELERY_BEAT_SCHEDULE's tasks; one leads, by a lease in PostgreSQL renewed
# every WR_SCHEDULER_RENEW_SECONDS for WR_SCHEDULER_LEASE_SECONDS. A killed leader is replaced
# within the sum; a shorter lease fails over sooner but is lost to a leader that stalls longer.
WR_SCHEDULER_LEASE_SECONDS = env_float("WR_SCHEDULER_LEASE_SECONDS", 1.5, minimum=0.5)
WR_SCHEDULER_RENEW_SECONDS = env_float("WR_SCHEDULER_RENEW_SECONDS", 0.3, minimum=0.05)
if WR_SCHEDULER_RENEW_SECONDS * 2 > WR_SCHEDULER_LEASE_SECONDS:
    raise ImproperlyConfigured(
        "WR_SCHEDULER_LEASE_SECONDS must be at least twice WR_SCHEDULER_RENEW_SECONDS"
    )
# Every entry: the task's name, its period in seconds (or a celery crontab, read in UTC) and
# the options it is sent with (an `expires`, so that a late one is dropped).
WR_MAINTENANCE_EXPIRES = 10.0
CELERY_BEAT_SCHEDULE = {
    "room-tick": {
        "task": "queueing.tasks.room_tick",
        "schedule": WR_TICK_SECONDS,
        # A dispatch that waited longer than its period is superseded by the next one.
        "options": {"expires": WR_TICK_SECONDS},
    },
    "hot-index-maintain": {
        "task": "queueing.tasks.hot_index_maintain",
        "schedule": env_float("WR_HOT_INDEX_CHECK_SECONDS", 2.0, minimum=0.5),
        # A check that waited longer than its period is stale: the next one supersedes it.
        "options": {"expires": 2.0},
    },
    # Retention (docs/operations.md, "Retention and archives"): on-sales ended more than
    # WR_RETENTION_DAYS ago archived a few a run; expired place links and address digests
    # past their use purged. Staff login lockouts are the dashboard's (the layers: queueing
    # may not import dashboard), purged by their own entry.
    # An hourly run not started within WR_MAINTENANCE_EXPIRES is skipped (the next comes
    # within the hour): on RabbitMQ, which drops an expired message only at the queue's head,
    # an hour's time to live would hold every expired tick behind it while no worker runs.
    "retention": {
        "task": "queueing.tasks.retention_run",
        "schedule": WR_RETENTION_CHECK_SECONDS,
        "options": {"expires": WR_MAINTENANCE_EXPIRES},
    },
    # Webhook deliveries due: retries, and first attempts whose task never ran.
    "webhooks-sweep": {
        "task": "queueing.tasks.webhooks_sweep",
        "schedule": WR_WEBHOOK_SWEEP_SECONDS,
        "options": {"expires": WR_WEBHOOK_SWEEP_SECONDS},
    },
    "login-lockouts-purge": {
        "task": "dashboard.tasks.login_lockouts_purge",
        "schedule": WR_RETENTION_CHECK_SECONDS,
        "options": {"expires": WR_MAINTENANCE_EXPIRES},
    },
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first so that an anonymous API call gets 401 with WWW-Authenticate. Hashed,
        # expiring, scoped tokens (staff/api_tokens.py); the scope is checked there too.
        "staff.api_tokens.StaffTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["config.parsers.SafeJSONParser"],
    "EXCEPTION_HANDLER": "queueing.web.api_errors.drf_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Waiting room API",
    "DESCRIPTION": "Fans, shops, staff and auditors. The contract: docs/api.md in the repository.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Public, as docs/api.md is: it shows shapes, never data, and integrators build on it.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No badge from Swagger's public validator: the page talks to the room only.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None, "displayOperationId": True},
    "COMPONENT_SPLIT_REQUEST": True,
    # Tagged by what follows /api/v1/: "manage" (staff) and "audit" (auditors), as the
    # reference shows them beside the hand-described "fans", "shops" and "operations".
    "SCHEMA_PATH_PREFIX": r"/api/v[0-9]+",
    "OAS_VERSION": "3.1.0",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "config.openapi.add_hot_paths",
    ],
}

LANGUAGE_CODE = "en"
# Chosen per request: the language switcher's cookie first, then Accept-Language. Each named in
# itself, as the switcher shows them (Django's name_local, capitalised; README "Languages"). The
# fans' pages are in all of them; the staff dashboard and admin in English and German only.
LANGUAGES = [
    ("en", "English"),
    ("de", "Deutsch"),
    ("fr", "Français"),
    ("es", "Español"),
    ("it", "Italiano"),
    ("nl", "Nederlands"),
    ("pl", "Polski"),
    ("pt", "Português"),
    ("ja", "日本語"),
    ("ar", "العربيّة"),
]
LOCALE_PATHS = [BASE_DIR / "locale"]
# Where Django's number formats differ from the browser's (CLDR, Intl.NumberFormat), the
# room's own win, so the page's numbers read the same before and after a live update.
FORMAT_MODULE_PATH = ["config.formats"]
LANGUAGE_COOKIE_HTTPONLY = True
LANGUAGE_COOKIE_SAMESITE = "Lax"
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# collectstatic's output: what nginx serves in production (the image collects at build time).
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# With DEBUG off, every file is named after its content's hash (waiting.3f2a1b9c0d4e.css) and
# pages ask for those names, so that browsers and nginx keep them for a year and a release
# never meets a stale copy; collectstatic writes them and the manifest of names, which pages
# then need. With DEBUG on (make run, the tests), files keep their names and come straight
# from the apps, with no collectstatic step.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage."
        + ("StaticFilesStorage" if DEBUG else "ManifestStaticFilesStorage")
    },
}
# Let the app server serve static files itself (fine for one box; put a CDN in front at scale).
WR_SERVE_STATIC = env_bool("WR_SERVE_STATIC", True)

# Request bodies on this API are tiny; refuse big ones early.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DJANGO_MAX_BODY_BYTES", 64 * 1024, minimum=1024)
# The admin alone takes uploads: an on-sale's logo of up to 256 KiB (events.models.LOGO_MAX_BYTES)
# with the rest of its form, so bodies under /admin/ may be this much larger.
WR_ADMIN_UPLOAD_BYTES = 256 * 1024 + 16 * 1024

# The waiting-room identity cookie (signed) that makes a repeated join return the same ticket.
WR_IDENTITY_COOKIE = "wr_id"
WR_IDENTITY_COOKIE_MAX_AGE = env_int("WR_IDENTITY_COOKIE_MAX_AGE", 7 * 24 * 3600, minimum=60)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
LANGUAGE_COOKIE_SECURE = SESSION_COOKIE_SECURE

# HTTPS in production (secure by default when DEBUG is off; every value can be overridden).
SECURE_SSL_REDIRECT = env_bool("DJANGO_SSL_REDIRECT", not DEBUG)
# Probes and scrapers talk plain HTTP inside the cluster.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
# Preload makes HTTPS-only stick in browsers for the whole domain: turn it off with
# DJANGO_HSTS_PRELOAD=0 if the room's domain also serves plain-HTTP sites.
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if env_bool("DJANGO_BEHIND_TLS_PROXY", False):
    # Only when a proxy of ours terminates TLS and sets this header (never trust it otherwise).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Our pages load scripts and styles from this origin only (style attributes for the bar), and
# open WebSockets to the room only: 'self' covers ws(s) to the page's own host in browsers that
# follow CSP 3; the public URL's socket origin is named for those that do not. Never `ws: wss:`,
# which would let a script injected into a page talk to any host.
_PUBLIC = urlsplit(WR_PUBLIC_URL)
_SOCKET_ORIGIN = f"{'wss' if _PUBLIC.scheme == 'https' else 'ws'}://{_PUBLIC.netloc}"
WR_CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    f"img-src 'self' data:; connect-src 'self' {_SOCKET_ORIGIN}; frame-ancestors 'none'; "
    "base-uri 'self'; form-action 'self'"
)

# One JSON object a line (config/logs.py), or plain text by default on a developer's machine
# (DEBUG on): LOG_FORMAT, LOG_LEVEL.
LOGGING = logging_from_env()
# Tracing (queueing/observability.py): on when an OTLP endpoint is named, in the standard
# OpenTelemetry variables the SDK reads itself (sampler, service name, headers...).
WR_TRACING = bool(
    env_str("OTEL_EXPORTER_OTLP_ENDPOINT", "") or env_str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
) and not env_bool("OTEL_SDK_DISABLED", False)
# The release the traces and error reports name (pyproject.toml's version).
WR_RELEASE = VERSION
# Error reports to Sentry (or a compatible ingestion), off while empty; a secret (_FILE form).
SENTRY_DSN = env_secret("SENTRY_DSN", "")
SENTRY_ENVIRONMENT = env_str("SENTRY_ENVIRONMENT", "production")

# How long a process trusts its cached copy of an event's tier layout.
WR_LAYOUT_CACHE_SECONDS = env_float("WR_LAYOUT_CACHE_SECONDS", 2.0, minimum=0.0)
# The gate (GET /gate/{slug}/check): how long a web process trusts the session status it
# read for a pass; a completed, abandoned or revoked session is refused this long after it
# ended at most (plus one read: queueing/line/sessions.py).
WR_GATE_STATE_SECONDS = env_float("WR_GATE_STATE_SECONDS", 1.0, minimum=0.0)
# The gate: how long a web process applies the traffic rules it read for an on-sale (compiled
# once per read); a change staff save applies this long after at most, plus one read
# (queueing/line/gate_rules.py).
WR_TRAFFIC_RULES_SECONDS = env_float("WR_TRAFFIC_RULES_SECONDS", 2.0, minimum=0.0)
# Rows per batch when the hot index is rebuilt from PostgreSQL.
WR_REBUILD_BATCH = env_int("WR_REBUILD_BATCH", 5000, minimum=100)
# How long a rebuild may hold its per-event lock before another process may take over.
WR_REBUILD_LOCK_SECONDS = env_int("WR_REBUILD_LOCK_SECONDS", 300, minimum=10)
# A lost index found by a fan's poll is sent for rebuilding at most once per this many seconds.
WR_REBUILD_REQUEST_SECONDS = env_int("WR_REBUILD_REQUEST_SECONDS", 5, minimum=1)
# While the hot index cannot answer (Redis away, index missing or rebuilding), each process
# reads a snapshot of an on-sale's line (per tier: count and checkpoints) at most once per
# this many seconds, and places every poll from it (queueing/line/snapshots.py) ...
WR_DEGRADED_SNAPSHOT_SECONDS = env_float("WR_DEGRADED_SNAPSHOT_SECONDS", 1.0, minimum=0.1)
# A line of several lanes (queueing/line/lanes.py): how long a process keeps the lanes'
# summary it read, and how old the tick's may be before a process reads the lanes itself.
WR_LANES_SUMMARY_SECONDS = env_float("WR_LANES_SUMMARY_SECONDS", 1.0, minimum=0.0)
WR_LANES_SUMMARY_STALE_SECONDS = env_float("WR_LANES_SUMMARY_STALE_SECONDS", 3.0, minimum=0.0)
# ... except in a line of at most this many waiting fans, where positions are counted in
# PostgreSQL (exact, and cheap at that size).
WR_DEGRADED_EXACT_LINE = env_int("WR_DEGRADED_EXACT_LINE", 1000, minimum=0)
# After the hot index's (plain) Redis could not be reached, a process does not try it again
# for this long: its polls are answered degraded and its ticks go on from PostgreSQL at once
# meanwhile, rather than each waiting out a refused connection or a socket timeout.
WR_HOT_RETRY_SECONDS = env_float("WR_HOT_RETRY_SECONDS", 0.5, minimum=0.0)
# Retry-After (seconds) on 429 queue_full.
WR_QUEUE_FULL_RETRY_AFTER = env_int("WR_QUEUE_FULL_RETRY_AFTER", 30, minimum=1)
# Records one "verify now" on the auditors' page checks at most (dashboard/audit_verdicts.py):
# a long trail is checked a stretch per request, each going on from where the last stopped,
# so that no request reads millions of records (about 11,000 records a second were checked on
# a shared 2-core machine: some 2 s a request).
WR_AUDIT_VERIFY_MAX = env_int("WR_AUDIT_VERIFY_MAX", 25_000, minimum=1)
# Most fans admitted by one admission run of one event.
WR_ADMISSION_BATCH = env_int("WR_ADMISSION_BATCH", 500, minimum=1)
# A closed line revoked in bulk (queueing/records/bulk_ends.py): entries per transaction,
# chunks at once (threads, each with its own connection; two were slower than one on this
# 2-core machine, where PostgreSQL shares the cores: docs/benchmarks-notes.md), and how long
# one tick goes on before it broadcasts and leaves the rest to the next.
WR_LINE_END_CHUNK = env_int("WR_LINE_END_CHUNK", 50_000, minimum=1)
WR_LINE_END_PARALLEL = env_int("WR_LINE_END_PARALLEL", 1, minimum=1)
WR_LINE_END_SECONDS = env_float("WR_LINE_END_SECONDS", 10.0, minimum=0.0)
# The unseen expired in bulk while the line is live: smaller chunks, since joins wait for the
# chain head while a chunk's records are written (1,000 held it 27-56 ms, as an admission of 500
# does; 2,000 held it 55-229 ms), several a tick for at most WR_EXPIRY_SECONDS, so that
# admission is not held back (line/expiry.py).
WR_EXPIRY_CHUNK = env_int("WR_EXPIRY_CHUNK", 1_000, minimum=1)
WR_EXPIRY_SECONDS = env_float("WR_EXPIRY_SECONDS", 0.5, minimum=0.0)
# Rate credit left unspent (a late tick, a full shop) builds up to this many seconds of the
# pace and no further, so a late tick loses nothing and an idle spell floods nothing.
WR_ADMISSION_BURST_SECONDS = env_float("WR_ADMISSION_BURST_SECONDS", 3.0, minimum=0.0)
# Entries added to the hot index per pipeline (one round trip each) after a commit.
WR_INDEX_ADD_CHUNK = env_int("WR_INDEX_ADD_CHUNK", 1000, minimum=1)
# Entries at the front of each tier checked against PostgreSQL every tick (ghost removal).
WR_INDEX_HEAD_CHECK = env_int("WR_INDEX_HEAD_CHECK", 64, minimum=1)
# How long the last tick is kept for the snapshots of newly opened pages (seconds).
WR_TICK_CACHE_SECONDS = env_int("WR_TICK_CACHE_SECONDS", 60, minimum=5)
# How long per-minute line samples are kept for the dashboard's charts (seconds).
WR_LINE_SAMPLES_SECONDS = env_int("WR_LINE_SAMPLES_SECONDS", 7200, minimum=3600)
# Tries of a leave whose ticket keeps changing under it before 409 conflict.
WR_LEAVE_ATTEMPTS = env_int("WR_LEAVE_ATTEMPTS", 3, minimum=1)
# How long a proof-of-work challenge may be solved and spent (seconds).
WR_POW_CHALLENGE_SECONDS = env_int("WR_POW_CHALLENGE_SECONDS", 300, minimum=10)
# Retry-After (seconds) on 503: PostgreSQL unreachable or its pool exhausted, not ready.
WR_UNAVAILABLE_RETRY_AFTER = env_int("WR_UNAVAILABLE_RETRY_AFTER", 5, minimum=1)

# /metrics: a bearer token if set; otherwise only loopback and private addresses may scrape.
WR_METRICS_TOKEN = env_secret("WR_METRICS_TOKEN", "")

# Pass-signing private keys are sealed in PostgreSQL (queueing/passes/sealing.py) under these
# Fernet keys, which are not in the database: a copy of the database alone cannot sign passes.
# Comma-separated, the first seals and every one opens (rotation: a new key first, the old one
# second, then `manage.py reseal_pass_keys`). With DEBUG on, derived from the secret keys.
WR_PASS_KEY_ENCRYPTION_KEYS = fernet_keys_checked(
    "WR_PASS_KEY_ENCRYPTION_KEY", env_secret("WR_PASS_KEY_ENCRYPTION_KEY", "")
) or ([fernet_key_derived(key) for key in (SECRET_KEY, *SECRET_KEY_FALLBACKS)] if DEBUG else [])
if not WR_PASS_KEY_ENCRYPTION_KEYS:
    raise ImproperlyConfigured(
        "WR_PASS_KEY_ENCRYPTION_KEY must be set when DJANGO_DEBUG is off "
        "(a Fernet key: python -c 'from cryptography.fernet import Fernet; "
        "print(Fernet.generate_key().decode())')"
    )
# The demo shop (/shop/<slug>/) that make run's demo on-sale sends fans to.
WR_DEMO_SHOP = env_bool("WR_DEMO_SHOP", DEBUG)

# Abuse: joins per client IP and per identity per minute (0 = no limit). A venue's or
# carrier's NAT puts many fans behind one address: keep the IP limit generous.
WR_JOIN_LIMIT_PER_IP = env_int("WR_JOIN_LIMIT_PER_IP", 120, minimum=0)
WR_JOIN_LIMIT_PER_IDENTITY = env_int("WR_JOIN_LIMIT_PER_IDENTITY", 20, minimum=0)
# How many proxies of ours stand in front of the app and append to X-Forwarded-For (0: none,
# use the peer address; never trust the header then).
WR_TRUSTED_PROXY_COUNT = env_int("WR_TRUSTED_PROXY_COUNT", 0, minimum=0)

# Abuse: wrong access codes per client address (IPv6 per /64) and on-sale in a sliding
# window. Once spent, that address's joins *with a code* to that on-sale are refused (right
# code or not) until the window has room; joins without a code are not affected. 0 = off.
WR_WRONG_CODES_PER_ADDRESS = env_int("WR_WRONG_CODES_PER_ADDRESS", 10, minimum=0)
WR_WRONG_CODES_WINDOW_SECONDS = env_int("WR_WRONG_CODES_WINDOW_SECONDS", 600, minimum=1)

# Retry-After (seconds) when an address already holds an on-sale's max_live_per_address.
WR_ADDRESS_LIMIT_RETRY_AFTER = env_int("WR_ADDRESS_LIMIT_RETRY_AFTER", 60, minimum=1)

# WebSockets. At most this many sockets stay open per ticket, across all web processes: the
# newest wins, the oldest page is told it was opened elsewhere (close code 4409).
WR_SOCKETS_PER_TICKET = env_int("WR_SOCKETS_PER_TICKET", 3, minimum=1)
# The tick reaches a page by its distance from the front (queueing/rules/tick_bands.py): the
# first WR_TICKS_FRONT_PLACES places get every tick, pages behind them one every few seconds
# (at most 10 s apart, 30 s while the process is overloaded). WR_TICKS_BY_DISTANCE=0 sends
# every tick to every page, as the room did before (a small room, or to compare the cost).
WR_TICKS_FRONT_PLACES = env_int("WR_TICKS_FRONT_PLACES", 10_000, minimum=1)
WR_TICKS_BY_DISTANCE = env_bool("WR_TICKS_BY_DISTANCE", True)
# How long a "Continue on your phone" link moves a place (queueing/line/place_links.py).
WR_PLACE_LINK_SECONDS = env_int("WR_PLACE_LINK_SECONDS", 600, minimum=30)
# How many such links one place may ask for within WR_PLACE_LINK_SECONDS (0 = no limit); a
# new one revokes the one before, so only the newest works.
WR_PLACE_LINKS_PER_PLACE = env_int("WR_PLACE_LINKS_PER_PLACE", 5, minimum=0)
# "E-mail me when it's my turn" (queueing/line/turn_mail.py): how many addresses one client
# address (IPv6 per /64) may leave for one on-sale within the window (0 = no limit), and the
# window, which is also how long an address, once asked for, gets no second mail from the
# on-sale.
WR_TURN_MAIL_PER_ADDRESS = env_int("WR_TURN_MAIL_PER_ADDRESS", 3, minimum=0)
WR_TURN_MAIL_WINDOW_SECONDS = env_int("WR_TURN_MAIL_WINDOW_SECONDS", 86_400, minimum=60)
# At most this many sockets per client address (IPv6 per /64) in each web process; past it a
# socket is closed with 4429 and its page polls instead (0 = no cap). Fans behind one NAT
# share it: keep it generous.
WR_SOCKETS_PER_ADDRESS = env_int("WR_SOCKETS_PER_ADDRESS", 200, minimum=0)
# The biggest WebSocket message a client may send (bytes); the page sends none. The server
# closes the socket with 1009 on a bigger one.
WR_WS_MAX_MESSAGE_BYTES = env_int("WR_WS_MAX_MESSAGE_BYTES", 64 * 1024, minimum=1024)
# How often the server pings each WebSocket (uvicorn's own default is 20 s); a socket whose
# pong does not come within 20 s is closed. A ping cost a web process about as much as five
# ticks (docs/benchmarks-notes.md): with ticks at most 10 s apart (30 s overloaded) keeping
# proxies and NATs awake, pings only find dead sockets, within 80 s rather than 40 s.
WR_WS_PING_SECONDS = env_float("WR_WS_PING_SECONDS", 60.0, minimum=1.0)

# Staff password logins (/admin/login/, which /dashboard/ sends staff to): failed logins per
# account (username) and per client address (IPv6 per /64) within the window; reaching either
# budget locks that account or address out, right password included, for the lockout
# (0 = no limit). Counted in Redis; while Redis is unreachable logins are not throttled.
WR_LOGIN_FAILURES_PER_ACCOUNT = env_int("WR_LOGIN_FAILURES_PER_ACCOUNT", 5, minimum=0)
WR_LOGIN_FAILURES_PER_ADDRESS = env_int("WR_LOGIN_FAILURES_PER_ADDRESS", 20, minimum=0)
WR_LOGIN_FAILURE_WINDOW_SECONDS = env_int("WR_LOGIN_FAILURE_WINDOW_SECONDS", 900, minimum=1)
WR_LOGIN_LOCKOUT_SECONDS = env_int("WR_LOGIN_LOCKOUT_SECONDS", 900, minimum=1)

# Staff and auditors signing in through the company's OpenID Connect provider
# (mozilla-django-oidc; dashboard/oidc.py; docs/operations.md, "Staff sign-in"): on once a
# client id is set. The provider's endpoints come from its discovery document under
# OIDC_ISSUER, or each is named. Who gets in, with what, is OIDC_GROUP_MAP: the provider's
# groups to the room's roles (the names below; what each grants: dashboard/oidc.py).
OIDC_ROLES = ("viewer", "staff", "integration-keys", "auditor", "superuser")
OIDC_RP_CLIENT_ID = env_str("OIDC_CLIENT_ID", "")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_RP_CLIENT_SECRET = env_secret("OIDC_CLIENT_SECRET", "")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
OIDC_ISSUER = env_str("OIDC_ISSUER", "").rstrip("/")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_USERINFO_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = env_str("OIDC_SIGN_ALGORITHM", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_SCOPES", "openid email profile groups")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_GROUP_MAP = env_group_map("OIDC_GROUP_MAP", roles=OIDC_ROLES)
if OIDC_ENABLED and not OIDC_GROUP_MAP:
    raise ImproperlyConfigured(
        "OIDC_CLIENT_ID is set but OIDC_GROUP_MAP is empty: nobody could sign in"
    )
if OIDC_ENABLED and not (OIDC_ISSUER or OIDC_OP_AUTHORIZATION_ENDPOINT):
    raise ImproperlyConfigured("OIDC_CLIENT_ID is set: set OIDC_ISSUER (or every OIDC_*_ENDPOINT)")
# The library's own protections, all on: state, nonce, and PKCE (S256).
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT_SECONDS", 10, minimum=1)
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"
LOGIN_REDIRECT_URL = "/dashboard/"
LOGIN_REDIRECT_URL_FAILURE = "/dashboard/sign-in/?oidc=refused"
if OIDC_ENABLED:
    AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        "dashboard.oidc.RoomOIDCBackend",
    ]

# "It's your turn" mails (queueing/line/turn_mail.py), through Django's e-mail API. Without an
# EMAIL_HOST they are written to the worker's output (the console backend), which is what the
# demo wants; production points EMAIL_HOST at its SMTP relay.
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "waiting-room@localhost")
