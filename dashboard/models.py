"""Staff-side records: lockouts of password logins to the admin (and so the dashboard), and
the last verdict on each on-sale's audit chain.

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


class AuditVerdict(models.Model):
    """The last check of an on-sale's audit chain (``dashboard/audit_verdicts.py``): the
    auditors' page shows it rather than read a trail of millions of records on every view, and
    the next check goes on from where this one stopped."""

    event = models.OneToOneField(
        "events.Event", on_delete=models.CASCADE, primary_key=True, related_name="audit_verdict"
    )
    ok = models.BooleanField()
    # Every record up to this seq was found intact, the last of them with this hash.
    checked_seq = models.BigIntegerField(default=0)
    checked_hash = models.CharField(max_length=64)
    # The chain head's seq when the check began: records after it were not looked at.
    head_seq = models.BigIntegerField(default=0)
    # When not ok: the first record that failed (none when the end of the chain is missing),
    # and what failed, in words.
    first_bad_seq = models.BigIntegerField(null=True, blank=True)
    first_bad_id = models.BigIntegerField(null=True, blank=True)
    # The lane of the chain that failed (null: the root chain, or one of its root records).
    first_bad_lane = models.SmallIntegerField(null=True, blank=True)
    problem = models.CharField(max_length=200, blank=True)
    checked_at = models.DateTimeField()
    # An on-sale with lanes: the fields above are its root chain's, and each lane's check
    # is here, {"<lane>": {"checked_seq", "checked_hash", "head_seq"}}.
    lanes = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        outcome = "intact" if self.ok else "broken"
        return f"audit chain of event {self.event_id}: {outcome} up to #{self.checked_seq}"

    @property
    def checked_records(self) -> int:
        """Records found intact, over every chain."""
        return self.checked_seq + sum(lane["checked_seq"] for lane in self.lanes.values())
