from django.apps import AppConfig


class QueueingConfig(AppConfig):
    name = "queueing"
    verbose_name = "Queue"

    def ready(self) -> None:
        from queueing import checks  # noqa: F401  (registers the Redis eviction-policy check)
