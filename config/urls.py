from django.contrib import admin
from django.urls import include, path

from config.health import healthz, readyz
from queueing import api_fan

api_v1 = [
    path("events/<str:slug>/join", api_fan.join, name="api-join"),
    path("events/<str:slug>", api_fan.event_detail, name="api-event"),
    path("tickets/<str:ticket>", api_fan.ticket, name="api-ticket"),
    path("manage/", include("events.urls")),
]

urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("admin/", admin.site.urls),
    path("healthz", healthz),
    path("readyz", readyz),
]

handler400 = "config.error_views.bad_request"
handler403 = "config.error_views.permission_denied"
handler404 = "config.error_views.page_not_found"
handler500 = "config.error_views.server_error"
