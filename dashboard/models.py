"""Staff-side records: lockouts of password logins to the admin (and so the dashboard).

The room's audit trail is a hash chain per on-sale (queueing/records/audit.py); a staff login
belongs to no on-sale, so its lockouts are kept here, append-only, and shown read-only in the
admin.
"""

from __future__ import annotations

from django.db import models


class LockoutScope(models.TextChoices):
    ACCOUNT = "account", "account (username)"
    ADDRESS = "address", "client address"


class LoginLockout(models.Model):
    """One lockout as it started: who was locked out, from where, after how many failures."""

    at = models.DateTimeField()
    scope = models.CharField(max_length=16, choices=LockoutScope.choices)
    # The username of the attempt that started the lockout, as typed (it need not exist).
    username = models.CharField(max_length=150, blank=True)
    # The client address (trusted proxies honoured) and its budget: the IPv4 address or the
    # IPv6 /64.
    address = models.CharField(max_length=64)
    address_bucket = models.CharField(max_length=64)
    failures = models.PositiveIntegerField()
    locked_until = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["at"], name="login_lockout_at")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(scope__in=LockoutScope.values), name="login_lockout_scope_valid"
            ),
        ]

    def __str__(self) -> str:
        who = self.username if self.scope == LockoutScope.ACCOUNT else self.address_bucket
        return f"{self.scope} {who} locked out at {self.at:%Y-%m-%d %H:%M:%S}"
