from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

AUDITORS_GROUP = "auditors"


def is_auditor(user: Any) -> bool:
    return bool(
        user
        and user.is_authenticated
        and (user.is_staff or user.groups.filter(name=AUDITORS_GROUP).exists())
    )


class IsStaffOrAuditorReadOnly(BasePermission):
    """Staff, or members of the auditors group; and only to read."""

    message = "Only staff and auditors may read the audit trail."

    def has_permission(self, request: Request, view: Any) -> bool:
        return request.method in SAFE_METHODS and is_auditor(request.user)
