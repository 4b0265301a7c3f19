"""The queue's system of record: entries and their append-only, hash-chained audit trail, the
pass keys, the scheduler's lease, a draw's registrations, and the webhooks that tell the world
outside what happened to an on-sale.

Over 350 lines on purpose: every table of the queue is declared here, where Django's app
registry looks for them, each with the constraints that hold its states."""

from __future__ import annotations

import secrets
import uuid

from django.db import models
from django.db.models import Q
from django.db.models.expressions import Func, Value

from queueing.rules.states import LIVE, QUEUED, TERMINAL, WAS_ADMITTED, EntryStatus

ORDER_KEY_SEQUENCE = "queueing_order_key_seq"


def new_secret_key() -> str:
    return secrets.token_hex(32)


class NextVal(Func):
    function = "nextval"
    output_field = models.BigIntegerField()


class QueueEntry(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # Staff read "on-sale" on every screen, the admin's included.
    event = models.ForeignKey(
        "events.Event", on_delete=models.PROTECT, related_name="entries", verbose_name="on-sale"
    )
    tier = models.ForeignKey("events.Tier", on_delete=models.PROTECT, related_name="entries")
    # SHA-256 of "<kind>:<value>" (user, cookie or idempotency key); never the raw value.
    identity = models.CharField(max_length=64)
    # SHA-256 of the client address the join came from (an IPv6 /64 counts as one address;
    # queueing/web/abuse.py), for max_live_per_address; never the address itself. Null for
    # entries made before it was kept (NULL, not "": unknown is no address, left out of the
    # partial index, and adding the column rewrites nothing).
    address = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    # Monotonic across the whole room, assigned by PostgreSQL at insert; the pre-queue
    # shuffle permutes the keys of its cohort among themselves.
    order_key = models.BigIntegerField(db_default=NextVal(Value(ORDER_KEY_SEQUENCE)))
    # The entry's lane of the on-sale's line (queueing/rules/lanes.py), drawn at the join
    # from the identity and kept, so that no later step draws it again: which Redis keys hold
    # the fan (queueing/hot/keys.py). 0 in a line of one lane.
    lane = models.PositiveSmallIntegerField(db_default=0)
    status = models.CharField(max_length=16, choices=EntryStatus.choices)
    joined_at = models.DateTimeField()
    status_changed_at = models.DateTimeField()
    admitted_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    pass_expires_at = models.DateTimeField(null=True, blank=True)
    # First time the admitted fan was handed the pass; an admission nobody claims within
    # the heartbeat window is released so that abandoned tabs cannot hold shop slots.
    pass_issued_at = models.DateTimeField(null=True, blank=True)
    # The wait quoted when the fan joined (seconds), kept for the accuracy report.
    quoted_p10 = models.FloatField(null=True, blank=True)
    quoted_p50 = models.FloatField(null=True, blank=True)
    quoted_p90 = models.FloatField(null=True, blank=True)
    # The shop URL the fan first asked for (the gate's or the page's ``return``), as given;
    # whether its host may be sent to is decided when the pass is handed over, against the
    # on-sale's hosts of that moment (queueing/rules/gate.py).
    # db_default: the join inserts name only the columns they set (records/bulk_insert.py).
    return_url = models.CharField(max_length=2000, blank=True, db_default="")
    # The X-Request-ID of the join that made the entry (queueing/web/request_ids.py), so
    # that the admission run's log names the request that put this fan in line: one id
    # followed from nginx to the worker that lets the fan in. Null for entries made before
    # it was kept, and for those made outside a request (adding the column rewrites nothing).
    join_request_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    # When the fan came back after a session that ended without completing (once per entry).
    reentered_at = models.DateTimeField(null=True, blank=True)
    # An address the fan left to be told by e-mail when their turn comes. Kept only while
    # it is needed: erased when the mail is sent and when the ticket ends
    # (records/transitions.py).
    notify_email = models.EmailField(max_length=254, blank=True, db_default="")
    notified_at = models.DateTimeField(null=True, blank=True)
    # The page's language when the address was left: the mail speaks it.
    notify_language = models.CharField(max_length=8, blank=True, db_default="")
    # Which browser holds the place on the waiting page: empty until the place is moved to
    # another device (line/place_links.py); then only the page cookie carrying this key
    # shows the place, and the old device's page says the place moved.
    holder_key = models.CharField(max_length=32, blank=True, db_default="")
    # When admission reached this fan while their page was away (unseen for the heartbeat
    # window): they were passed over, hold no shop slot, and keep their place at the front of
    # their tier until they come back or the on-sale's ``away_seconds`` run out from here
    # (queueing/line/away.py). Null otherwise, and cleared when they come back.
    passed_over_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "queue entry"
        verbose_name_plural = "queue entries"
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=EntryStatus.values), name="entry_status_valid"
            ),
            models.UniqueConstraint(
                fields=["event", "identity"],
                condition=Q(status__in=LIVE),
                name="one_live_entry_per_identity",
            ),
            models.CheckConstraint(
                condition=~Q(status__in=QUEUED) | Q(admitted_at__isnull=True),
                name="entry_queued_not_admitted",
            ),
            models.CheckConstraint(
                condition=~Q(status__in=WAS_ADMITTED) | Q(admitted_at__isnull=False),
                name="entry_admitted_has_time",
            ),
            models.CheckConstraint(
                condition=Q(status__in=TERMINAL, ended_at__isnull=False)
                | (~Q(status__in=TERMINAL) & Q(ended_at__isnull=True)),
                name="entry_ended_iff_terminal",
            ),
        ]
        indexes = [
            # Admission order and the PostgreSQL fallback for positions.
            # (Fans passed over while away are out of the order until they come back.)
            models.Index(
                fields=["event", "tier", "order_key"],
                condition=Q(status=EntryStatus.WAITING, passed_over_at__isnull=True),
                name="entry_waiting_order",
            ),
            # Fans passed over while away, whose hold runs out (line/expiry.py).
            models.Index(
                fields=["event", "passed_over_at"],
                condition=Q(status=EntryStatus.WAITING, passed_over_at__isnull=False),
                name="entry_passed_over",
            ),
            models.Index(fields=["event", "status"], name="entry_event_status"),
            # Arrivals per minute on the dashboard.
            models.Index(fields=["event", "joined_at"], name="entry_event_joined_at"),
            # Live places per client address (max_live_per_address), counted at join.
            models.Index(
                fields=["event", "address"],
                condition=Q(status__in=LIVE, address__isnull=False),
                name="entry_live_address",
            ),
            # Ended tickets still holding an address digest (kept for a possible re-entry):
            # the retention run erases them past the re-entry window (line/retention.py).
            models.Index(
                fields=["ended_at"],
                condition=Q(status__in=TERMINAL, address__isnull=False),
                name="entry_ended_address",
            ),
            # An identity's ended tickets: a random line's rejoin keeps the place of the one
            # before if it was never let in (line/joining.py, ``_places_drawn``).
            models.Index(
                fields=["event", "identity"],
                condition=Q(status__in=TERMINAL),
                name="entry_ended_identity",
            ),
            # Rate window (admissions in the last minute) and throughput statistics.
            models.Index(
                fields=["event", "admitted_at"],
                condition=Q(admitted_at__isnull=False),
                name="entry_event_admitted_at",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} ({self.status})"


class PlaceLink(models.Model):
    """A one-time link that moves a fan's place to the browser that opens it ("Continue on
    your phone", and the link in the "it's your turn" e-mail). Only the SHA-256 of its
    token is kept, so the table cannot be read back into working links."""

    class Purpose(models.TextChoices):
        DEVICE = "device"
        EMAIL = "email"

    token_sha256 = models.CharField(max_length=64, unique=True)
    entry = models.ForeignKey(QueueEntry, on_delete=models.CASCADE, related_name="place_links")
    purpose = models.CharField(max_length=8, choices=Purpose.choices)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["expires_at"], name="place_link_expires")]

    def __str__(self) -> str:
        return f"{self.purpose} link for {self.entry_id}"


class AuditAction(models.TextChoices):
    JOINED = "joined"
    SHUFFLED = "shuffled"
    ADMITTED = "admitted"
    REENTERED = "reentered"
    EXPIRED = "expired"
    # Admission reached a fan whose page was away: passed over, their place kept.
    AWAY = "away"
    # A fan passed over while away came back: at the front of their tier.
    BACK = "back"
    LEFT = "left"
    COMPLETED = "completed"
    ABANDONED = "abandoned"
    REVOKED = "revoked"
    REJECTED = "rejected"
    EVENT_CREATED = "event_created"
    EVENT_CHANGED = "event_changed"
    EVENT_PAUSED = "event_paused"
    EVENT_RESUMED = "event_resumed"
    EVENT_CLOSED = "event_closed"
    # The shop (or staff) said the stock is gone: the line closed with that reason.
    EVENT_SOLD_OUT = "event_sold_out"
    # The root chain's commitment to every lane's head (docs/api.md, "Lanes").
    ROOT = "root"
    # A draw's registrations (docs/api.md, "Registration and the draw"): staff set the window,
    # a fan registered (never their address), confirmed it by the mailed link.
    REGISTRATION_WINDOW_SET = "registration_window_set"
    REGISTERED = "registered"
    REGISTRATION_CONFIRMED = "registration_confirmed"
    # The list frozen, its commitment published, the draw done and its seed revealed.
    DRAWN = "drawn"
    # A winner (or the next waitlisted fan) invited; the invitation used to join; unused
    # past its time, which invites the next waitlisted fan of the tier.
    INVITED = "invited"
    INVITATION_USED = "invitation_used"
    INVITATION_LAPSED = "invitation_lapsed"


GENESIS_HASH = "0" * 64


class AuditChainHead(models.Model):
    """The tip of an event's root hash chain (its records without a lane); its row lock
    orders appends to that chain."""

    event = models.OneToOneField(
        "events.Event", on_delete=models.PROTECT, primary_key=True, related_name="audit_head"
    )
    seq = models.BigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default=GENESIS_HASH)
    # The Merkle root over the lane heads that the chain's last ``root`` record committed to
    # (empty before the first): a tick writes a root only when the lanes moved since.
    rooted = models.CharField(max_length=64, blank=True, default="")

    lane = None  # the root chain has no lane: read alike with AuditLaneHead's

    def __str__(self) -> str:
        return f"chain of event {self.event_id} at #{self.seq}"


class AuditLaneHead(models.Model):
    """The tip of one lane's hash chain of an event with lanes; its own row lock orders
    appends to that lane only, so joins to different lanes commit in parallel."""

    event = models.ForeignKey(
        "events.Event", on_delete=models.PROTECT, related_name="audit_lane_heads"
    )
    lane = models.SmallIntegerField()
    seq = models.BigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default=GENESIS_HASH)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["event", "lane"], name="audit_lane_head_unique"),
            models.CheckConstraint(condition=models.Q(lane__gte=0), name="audit_lane_head_lane"),
        ]

    def __str__(self) -> str:
        return f"chain of event {self.event_id} lane {self.lane} at #{self.seq}"


class AuditRecord(models.Model):
    event = models.ForeignKey(
        "events.Event", on_delete=models.PROTECT, related_name="audit", verbose_name="on-sale"
    )
    # The chain the record is in: null for the event's root chain, else its lane's.
    lane = models.SmallIntegerField(null=True, blank=True)
    # Position in its chain, 1-based and gapless.
    seq = models.BigIntegerField()
    at = models.DateTimeField()
    ticket_id = models.UUIDField(null=True, blank=True)
    action = models.CharField(max_length=32, choices=AuditAction.choices)
    actor = models.CharField(max_length=150)
    data = models.JSONField(default=dict)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    class Meta:
        constraints = [
            # One seq per chain; the root chain's (lane null) are one chain too.
            models.UniqueConstraint(
                fields=["event", "lane", "seq"],
                name="audit_seq_unique_per_chain",
                nulls_distinct=False,
            ),
        ]
        indexes = [
            models.Index(fields=["ticket_id"], name="audit_ticket"),
            models.Index(fields=["event", "action", "at"], name="audit_event_action_at"),
            models.Index(fields=["at"], name="audit_at"),
        ]

    def __str__(self) -> str:
        return f"{self.action} #{self.seq}"


class AdmissionState(models.Model):
    """Per-event admission bookkeeping, written only under the event's admission lock."""

    event = models.OneToOneField(
        "events.Event", on_delete=models.CASCADE, primary_key=True, related_name="admission"
    )
    tokens = models.FloatField(default=0.0)
    refilled_at = models.DateTimeField(null=True, blank=True)
    # Smooth weighted round-robin credit per weighted tier: {"<tier id>": int}.
    tier_credit = models.JSONField(default=dict)
    last_run_at = models.DateTimeField(null=True, blank=True)
    # Admissions per second over the last few minutes, [[unix second, count], ...], for the
    # throughput behind wait estimates.
    recent_counts = models.JSONField(default=list)
    # Per second of the same minutes, [[unix second, left the shop since the previous run,
    # inside after the run], ...]: the time a fan spends in the shop, by Little's law
    # (rules/eta.py). ``active_after`` is the last run's "inside after", None when the run did
    # not count the shop (no capacity, passthrough).
    recent_departures = models.JSONField(default=list)
    # Admissions per second per tier over the same minutes, {"<tier id>": [[second, n], ...]}:
    # what the tiers served first take of the pace (rules/eta.py, "Tiers").
    recent_tier_counts = models.JSONField(default=dict)
    active_after = models.IntegerField(null=True, blank=True)
    # True between an admission's commit and its removal from the hot index: if a worker
    # died in that window, the next run sees it and has the index rebuilt.
    index_pending = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"admission of event {self.event_id}"


class PassKey(models.Model):
    """An Ed25519 key that signs passes.

    The key with the latest ``activates_at`` in the past signs. A new key is published (in
    the JWKS) from its creation, before it activates, so that shops caching the JWKS know it
    by the time it signs; a superseded key stays published until every pass it signed has
    expired.
    """

    kid = models.CharField(max_length=32, unique=True)
    # The private key, sealed (queueing/passes/sealing.py): never plain PEM at rest. The
    # column keeps its first name, so the rename costs the database nothing.
    private_key_sealed = models.TextField(db_column="private_pem")
    public_jwk = models.JSONField()
    created_at = models.DateTimeField()
    activates_at = models.DateTimeField()

    class Meta:
        ordering = ["activates_at", "id"]

    def __str__(self) -> str:
        return self.kid


class SchedulerLease(models.Model):
    """Which of the room's scheduler processes sends the periodic tasks (queueing/scheduler.py):
    the ``holder`` whose lease has not run out by PostgreSQL's clock. Taken and renewed by one
    conditional upsert (records/scheduler_lease.py), never read-then-written."""

    name = models.CharField(max_length=64, primary_key=True)
    holder = models.CharField(max_length=200)
    expires_at = models.DateTimeField()
    # Since when this holder leads; kept through its renewals.
    acquired_at = models.DateTimeField()
    # How many times the lease went to another holder: the metric of takeovers.
    leader_changes = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name}: {self.holder}"


class SchedulerJob(models.Model):
    """One entry of CELERY_BEAT_SCHEDULE and the last period it was sent for. ``last_slot`` (the
    period's start, in milliseconds since the epoch) only grows, by a compare-and-set that also
    checks the sender's lease: two schedulers, even both believing they lead, send a period
    once."""

    name = models.CharField(max_length=200, primary_key=True)
    task = models.CharField(max_length=200)
    last_slot = models.BigIntegerField(default=-1)
    sent_at = models.DateTimeField(null=True, blank=True)
    sent_by = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return self.name


class WebhookEndpoint(models.Model):
    """A URL staff registered to hear of an on-sale's moments (docs/api.md, "Webhooks"): one
    on-sale's, or every on-sale's (``event`` null)."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    event = models.ForeignKey(
        "events.Event",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="webhook_endpoints",
        verbose_name="on-sale",
        help_text="Empty: every on-sale.",
    )
    url = models.URLField(max_length=500)
    # The webhook types it hears (queueing/rules/webhooks.py, WEBHOOK_TYPES).
    types = models.JSONField(default=list)
    description = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True)
    # Why it is off when the room turned it off (failures in a row), "" otherwise.
    disabled_reason = models.CharField(max_length=500, blank=True)
    # The signing secret, sealed like the pass keys (queueing/webhooks/secrets.py): it must be
    # read to sign, so it cannot be hashed; a copy of the database alone cannot sign.
    secret_sealed = models.TextField()
    # After a rotation the previous secret signs too, until then: a receiver has time to
    # take the new one without refusing the deliveries meanwhile.
    previous_secret_sealed = models.TextField(blank=True)
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    failures_in_a_row = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    created_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.url


class WebhookDeliveryState(models.TextChoices):
    PENDING = "pending", "Pending"  # an attempt is due at ``due_at`` (or under way)
    DELIVERED = "delivered", "Delivered"  # the receiver answered 2xx
    FAILED = "failed", "Failed"  # every attempt failed
    CANCELLED = "cancelled", "Cancelled"  # the endpoint was turned off or removed first


class WebhookDelivery(models.Model):
    """One webhook for one endpoint: its body fixed when it happened, sent until a 2xx."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    type = models.CharField(max_length=64)
    # The exact bytes POSTed (as text), so that every attempt signs and sends the same body.
    body = models.TextField()
    state = models.CharField(
        max_length=16, choices=WebhookDeliveryState.choices, default=WebhookDeliveryState.PENDING
    )
    # When the next attempt may start. Claiming an attempt moves it past the attempt's
    # timeout (compare-and-set on ``attempts``): a worker killed mid-attempt leaves a
    # delivery the sweep picks up again once that time has passed.
    due_at = models.DateTimeField()
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(
                fields=["due_at"],
                name="webhook_delivery_due",
                condition=Q(state="pending"),
            )
        ]

    def __str__(self) -> str:
        return f"{self.type} to {self.endpoint_id}"


class WebhookAttempt(models.Model):
    """One POST of a delivery and what came back (or why nothing did)."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="tries")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    # The receiver's status, null when none came (refused, timed out, connection failed).
    status_code = models.PositiveIntegerField(null=True, blank=True)
    response_excerpt = models.TextField(blank=True)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["delivery_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="one_attempt_per_number")
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery {self.delivery_id}"


class LineWatch(models.Model):
    """What the tick saw of an on-sale's line last time, so that the moments the line empties
    and (in safety net) starts queueing are told once each (queueing/line/line_watch.py)."""

    event = models.OneToOneField(
        "events.Event", on_delete=models.CASCADE, primary_key=True, related_name="line_watch"
    )
    in_line = models.BooleanField(default=False)
    seen_at = models.DateTimeField()
    # The end of the on-sale (its ends_at passing) told: once.
    end_told = models.BooleanField(default=False)
    # The line's start told. False only when a fan's join started it (line/schedule.py): the
    # join does no webhook work, so the next tick tells it. A row the tick makes for an
    # on-sale started before it had one says True: nothing old is told.
    start_told = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"line watch of event {self.event_id}"


class RegistrationWindow(models.Model):
    """An on-sale sold by a draw rather than first come (docs/api.md, "Registration and the
    draw"): when fans may register, and how many of each tier win and wait."""

    event = models.OneToOneField(
        "events.Event",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="registration_window",
    )
    opens_at = models.DateTimeField()
    closes_at = models.DateTimeField()
    # Per tier: the first ``winners`` of the draw's order win, the next ``waitlist`` wait.
    winners = models.PositiveIntegerField()
    waitlist = models.PositiveIntegerField(default=0)
    invitation_hours = models.PositiveIntegerField(default=48)
    # The HS256 key the shop signs its fans' identities with (write-only; "" = no shop route).
    shop_key = models.CharField(max_length=256, blank=True, default="")
    # Keys the hash of an identity (uniqueness without the address) and the confirmation
    # links; never shown, so nobody can test an address against the published hashes.
    identity_key = models.CharField(max_length=64, default=new_secret_key, editable=False)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # The list frozen and drawn, in one transaction after ``closes_at`` (line/draw.py): its
    # commitment (queueing/rules/draw.py) and how many registrations it holds.
    drawn_at = models.DateTimeField(null=True, blank=True, editable=False)
    list_root = models.CharField(max_length=64, blank=True, default="", editable=False)
    list_count = models.PositiveIntegerField(null=True, blank=True, editable=False)

    class Meta:
        indexes = [
            # The room's once-a-second "is a draw due" looks at undrawn windows only.
            models.Index(
                fields=["closes_at"], condition=Q(drawn_at__isnull=True), name="window_undrawn"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(closes_at__gt=models.F("opens_at")),
                name="registration_window_closes_after_open",
                violation_error_message="The registration window must close after it opens.",
            ),
        ]

    def __str__(self) -> str:
        return f"registration window of event {self.event_id}"


class RegistrationStatus(models.TextChoices):
    # An e-mail registration until its link is opened; a shop identity is confirmed at once.
    PENDING = "pending"
    CONFIRMED = "confirmed"


class Registration(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    event = models.ForeignKey(
        "events.Event", on_delete=models.PROTECT, related_name="registrations"
    )
    tier = models.ForeignKey("events.Tier", on_delete=models.PROTECT, related_name="registrations")
    # Keyed hash of "email:<address>" or "shop:<sub>" (queueing/rules/registrations.py).
    identity_hash = models.CharField(max_length=64)
    route = models.CharField(max_length=8)
    # Kept only until the outcome mail is sent, then erased ("").
    email = models.CharField(max_length=254, blank=True, default="")
    status = models.CharField(max_length=16, choices=RegistrationStatus.choices)
    created_at = models.DateTimeField()
    confirmed_at = models.DateTimeField(null=True, blank=True)
    confirm_mail_sent_at = models.DateTimeField(null=True, blank=True)
    # The hash the registration is published by (queueing/rules/registrations.py).
    public_hash = models.CharField(max_length=64)
    # Set by the draw: won, waitlisted or lost, and the rank in its tier's draw order.
    outcome = models.CharField(max_length=16, blank=True, default="")
    draw_rank = models.PositiveIntegerField(null=True, blank=True)
    # What the last outcome mail told ("", waitlisted, lost, invited): each told once.
    mailed = models.CharField(max_length=16, blank=True, default="")
    # The language the fan registered in (the page's, or the API request's): the
    # confirmation and outcome mails speak it; "" is the room's LANGUAGE_CODE.
    language = models.CharField(max_length=8, blank=True, db_default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["event", "identity_hash"], name="registration_one_per_identity"
            ),
            # The published list is paged in hash order.
            models.UniqueConstraint(
                fields=["event", "public_hash"], name="registration_hash_unique"
            ),
            models.CheckConstraint(
                condition=Q(status__in=RegistrationStatus.values),
                name="registration_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(route__in=["email", "shop"]), name="registration_route_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"registration {self.id}"


class InvitationStatus(models.TextChoices):
    SENT = "sent"
    USED = "used"
    LAPSED = "lapsed"


class Invitation(models.Model):
    """A drawn fan's single-use right to join the line (queueing/line/invitations.py), bound
    to their registration. Its code is derived, never stored: only its SHA-256."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    event = models.ForeignKey("events.Event", on_delete=models.PROTECT, related_name="invitations")
    registration = models.OneToOneField(
        Registration, on_delete=models.PROTECT, related_name="invitation"
    )
    code_hash = models.CharField(max_length=64, unique=True)
    status = models.CharField(max_length=16, choices=InvitationStatus.choices)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    # The line's entry the invitation joined as: a second use answers nothing new.
    entry = models.ForeignKey(
        QueueEntry, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        indexes = [
            # The dispatch's "has any invitation lapsed" reads the unused ones only.
            models.Index(
                fields=["expires_at"],
                condition=Q(status="sent"),
                name="invitation_unused",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=InvitationStatus.values), name="invitation_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"invitation {self.id}"
