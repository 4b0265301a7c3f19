"""A URLconf for tests: the fan API's two hot views under other prefixes (and one renamed
segment), with the same URL names. The lean paths must follow them here
(tests/queueing/web/test_hot_path_edges.py)."""

from django.urls import include, path

from queueing.web import api_fan

moved = [
    path("sales/<str:slug>/enter", api_fan.join, name="api-join"),
    path("line/<str:ticket>", api_fan.ticket, name="api-ticket"),
]

urlpatterns = [path("api/v9/", include(moved))]
