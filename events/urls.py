from django.urls import path

from events import api, services

urlpatterns = [
    path("events/", api.EventListCreateApi.as_view(), name="manage-events"),
    path("events/<slug:slug>/", api.EventDetailApi.as_view(), name="manage-event"),
    path(
        "events/<slug:slug>/pause",
        api.EventControlApi.as_view(service=services.event_pause),
        name="manage-event-pause",
    ),
    path(
        "events/<slug:slug>/resume",
        api.EventControlApi.as_view(service=services.event_resume),
        name="manage-event-resume",
    ),
    path(
        "events/<slug:slug>/close",
        api.EventControlApi.as_view(service=services.event_close),
        name="manage-event-close",
    ),
    path(
        "events/<slug:slug>/rotate-key",
        api.EventKeyRotateApi.as_view(),
        name="manage-event-rotate-key",
    ),
]
