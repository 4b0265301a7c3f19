"""API tokens of staff and auditors (docs/api.md, "Authentication"): stored as a lookup
prefix and the SHA-256 of the whole token, never the token itself, each with a scope, an
expiry and, once revoked, when."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class TokenScope(models.TextChoices):
    # What each scope lets through is decided in one place: staff/api_tokens.py.
    READ = "read", "read: the staff API's reads"
    CONTROL = "control", "control: the staff API, reads and changes"
    AUDIT = "audit", "audit: the auditors' API only"


class StaffToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="staff_tokens"
    )
    # The token's public head: finds the row without comparing digests across the table.
    prefix = models.CharField(max_length=16, unique=True)
    # SHA-256 of the whole token, hex. The token is random (256 bits), so no salt or slow
    # hash is needed: nobody can search the space, and a check costs one hash.
    digest = models.CharField(max_length=64)
    scope = models.CharField(max_length=16, choices=TokenScope.choices)
    label = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Written at most once a minute per token (staff/api_tokens.py, LAST_USED_EVERY).
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(scope__in=TokenScope.values), name="staff_token_scope_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(expires_at__gt=models.F("created_at")),
                name="staff_token_expires_after_creation",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.scope}, {self.user})"
