from django.urls import path

from staff import admit_now_api, api, registration_api, services, sold_out_api, webhooks_api

urlpatterns = [
    path("events/", api.EventListCreateApi.as_view(), name="manage-events"),
    path("events/<slug:slug>/", api.EventDetailApi.as_view(), name="manage-event"),
    *(
        path(
            f"events/<slug:slug>/{name}",
            api.EventControlApi.as_view(service=service),
            name=f"manage-event-{name}",
        )
        for name, service in services.EVENT_CONTROLS.items()
    ),
    path(
        "events/<slug:slug>/sold-out",
        sold_out_api.EventSoldOutApi.as_view(),
        name="manage-event-sold-out",
    ),
    path(
        "events/<slug:slug>/admit-now",
        admit_now_api.EventAdmitNowApi.as_view(),
        name="manage-event-admit-now",
    ),
    path(
        "events/<slug:slug>/registration",
        registration_api.RegistrationWindowApi.as_view(),
        name="manage-event-registration",
    ),
    path(
        "events/<slug:slug>/rotate-key",
        api.EventKeyRotateApi.as_view(),
        name="manage-event-rotate-key",
    ),
    path("webhooks/", webhooks_api.EndpointListCreateApi.as_view(), name="manage-webhooks"),
    path(
        "webhooks/<uuid:endpoint_id>/",
        webhooks_api.EndpointDetailApi.as_view(),
        name="manage-webhook",
    ),
    path(
        "webhooks/<uuid:endpoint_id>/rotate-secret",
        webhooks_api.EndpointRotateSecretApi.as_view(),
        name="manage-webhook-rotate-secret",
    ),
    path(
        "webhooks/<uuid:endpoint_id>/deliveries/",
        webhooks_api.EndpointDeliveriesApi.as_view(),
        name="manage-webhook-deliveries",
    ),
]
