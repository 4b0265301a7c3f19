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
    """Staff, or members of the auditors group; and only to read.

    A method the view does not serve is let through for them, so that DRF answers it as
    ``405 method_not_allowed`` with ``Allow`` (it asks permissions before it looks for the
    handler): the trail is read-only because no view there writes, and a write a view did
    serve would still be refused here."""

    message = "Only staff and auditors may read the audit trail."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not is_auditor(request.user):
            return False
        return request.method in SAFE_METHODS or request.method not in view.allowed_methods
