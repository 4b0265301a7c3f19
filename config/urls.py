from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from config.health import healthz, readyz
from config.metrics import metrics_view
from dashboard.api_reference import api_reference
from queueing.web import (
    api_draw,
    api_fan,
    api_passes,
    api_registration,
    api_traffic_rules,
    branding,
    demo_shop,
    gate,
    i18n,
    pages,
    place_pages,
    queueit,
    registration_pages,
)
from staff import sold_out_api

api_v1 = [
    path("events/<str:slug>/join", api_fan.join, name="api-join"),
    path("events/<str:slug>/challenge", api_fan.challenge, name="api-challenge"),
    path("events/<str:slug>/sold-out", sold_out_api.shop_sold_out, name="api-event-sold-out"),
    path(
        "events/<str:slug>/traffic-rules",
        api_traffic_rules.traffic_rules,
        name="api-traffic-rules",
    ),
    path(
        "events/<str:slug>/registrations",
        api_registration.RegistrationCreateApi.as_view(),
        name="api-registrations",
    ),
    path(
        "events/<str:slug>/invitations/join",
        api_registration.InvitationJoinApi.as_view(),
        name="api-invitation-join",
    ),
    path("events/<str:slug>/draw", api_draw.DrawApi.as_view(), name="api-draw"),
    path(
        "events/<str:slug>/draw/registrations",
        api_draw.DrawListApi.as_view(),
        name="api-draw-list",
    ),
    path(
        "registrations/<str:registration>/proof",
        api_draw.InclusionApi.as_view(),
        name="api-registration-proof",
    ),
    path(
        "registrations/confirm/<str:token>",
        api_registration.RegistrationConfirmApi.as_view(),
        name="api-registration-confirm",
    ),
    path("events/<str:slug>", api_fan.event_detail, name="api-event"),
    path("tickets/<str:ticket>", api_fan.ticket, name="api-ticket"),
    path("tickets/<str:ticket>/reenter", api_fan.reenter, name="api-ticket-reenter"),
    path("passes/verify", api_passes.verify, name="api-pass-verify"),
    path("passes/complete", api_passes.complete, name="api-pass-complete"),
    path("docs/", api_reference, name="api-reference"),
    path("manage/", include("staff.urls")),
    path("audit/", include("dashboard.urls_api")),
]

urlpatterns = [
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/v1/", include(api_v1)),
    path("e/<slug:slug>/", pages.waiting_page, name="waiting-page"),
    path("e/<slug:slug>/logo/<str:sha256>", branding.event_logo, name="event-logo"),
    path("e/<slug:slug>/move", place_pages.place_link_new, name="place-link-new"),
    path("e/<slug:slug>/move/<str:token>", place_pages.place_link_open, name="place-link"),
    path("e/<slug:slug>/mail", place_pages.turn_mail_form, name="turn-mail"),
    path("e/<slug:slug>/register/", registration_pages.registration_page, name="registration-page"),
    path(
        "e/<slug:slug>/register/join",
        registration_pages.registration_join,
        name="registration-join",
    ),
    path(
        "e/<slug:slug>/register/<str:token>/",
        registration_pages.registration_status,
        name="registration-status",
    ),
    # The language switcher posts to i18n/setlang/ (Django's set_language).
    path("i18n/", include("django.conf.urls.i18n")),
    path("i18n/catalog/<str:lang>.js", i18n.script_catalog, name="script-catalog"),
    path(".well-known/jwks.json", api_passes.jwks_document, name="jwks"),
    path("gate/<slug:slug>/check", gate.check, name="gate-check"),
    path("dashboard/", include("dashboard.urls")),
    path("admin/", admin.site.urls),
    path("healthz", healthz),
    path("readyz", readyz),
    path("metrics", metrics_view),
    # A shop's Queue-it connector sends fans here (docs/queueit.md): at the root, and under
    # /queueit/ for a queue domain that carries that path.
    path("", include(queueit.ROUTES)),
    path("queueit/", include(queueit.ROUTES)),
    path("queueit", queueit.enqueue),
]

if settings.WR_DEMO_SHOP:
    # It completes passes with the event's own integration key: a demo, not for production.
    urlpatterns += [
        path("shop/<slug:slug>/", demo_shop.checkout, name="demo-shop"),
        path("shop/<slug:slug>/complete", demo_shop.complete, name="demo-shop-complete"),
    ]

handler400 = "config.error_views.bad_request"
handler403 = "config.error_views.permission_denied"
handler404 = "config.error_views.page_not_found"
handler500 = "config.error_views.server_error"
