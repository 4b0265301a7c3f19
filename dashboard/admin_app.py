"""Django's admin, on the room's own admin site (``dashboard/admin_site.py``), whose login is
throttled. Kept apart from ``apps.py``: Django picks an app's config from that module, and an
admin config there would be a second candidate."""

from __future__ import annotations

from django.contrib.admin.apps import AdminConfig


class WaitingRoomAdminConfig(AdminConfig):
    default_site = "dashboard.admin_site.WaitingRoomAdminSite"
