from django.urls import path

from queueing.web.consumers import LineConsumer

websocket_urlpatterns = [
    path("ws/events/<slug:slug>/", LineConsumer.as_asgi()),
]
