from django.apps import AppConfig


class EventsConfig(AppConfig):
    name = "events"
    verbose_name = "On-sales"
