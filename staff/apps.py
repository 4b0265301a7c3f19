from django.apps import AppConfig


class StaffConfig(AppConfig):
    """Staff steering on-sales: the services every change goes through (audited), the staff
    API, the Django admin of the room's models, and the demo's seed."""

    name = "staff"
