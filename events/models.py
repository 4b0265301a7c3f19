"""On-sales and how fans are grouped in them (tiers, access codes).

Over 350 lines on purpose: every setting of an on-sale with the help text staff read at the
field, and every constraint with the message staff read when a form trips it, in one place."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import (
    MaxLengthValidator,
    MaxValueValidator,
    MinValueValidator,
    RegexValidator,
)
from django.db import models
from django.db.models import Func, Q, Value
from django.db.models.functions import Coalesce, Lower, NullIf

from events.traffic_rules import TrafficRulesError, parse_traffic_rules
from events.validation import (
    LANES_MAX,
    LANES_MIN,
    QUEUEIT_CUSTOMER_ID_RE,
    QUEUEIT_EVENT_ID_RE,
    return_host_normalise,
)


def new_integration_key() -> str:
    return secrets.token_urlsafe(32)


def new_shuffle_seed() -> str:
    return secrets.token_hex(32)


class SeedSQL(Func):
    """A fresh seed drawn by PostgreSQL, for a row inserted without one: 64 hex digits from
    two random UUIDs (``gen_random_uuid`` takes the server's strong random source), 244 random
    bits."""

    template = "replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '')"
    output_field = models.CharField()


class EventControl(models.TextChoices):
    """What staff have decided; the schedule decides the rest of the state."""

    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused"
    CLOSED = "closed", "Closed"


class QueueOrder(models.TextChoices):
    """In which order the line lets its fans in (docs/api.md, "Random order")."""

    # First come, first served: the order of the joins (one PostgreSQL sequence).
    FIFO = "fifo", "First come, first served"
    # Each fan's place is a keyed hash of the on-sale's secret seed and their ticket id,
    # fixed at the join and recomputable by anyone once the seed is revealed at the end.
    RANDOM = "random", "Random (verifiable)"


class EventMode(models.TextChoices):
    """How the room lets fans through (docs/api.md, "Staff API")."""

    # Everyone waits their turn at the configured pace: a scheduled on-sale.
    QUEUE = "queue", "Queue"
    # Always on: a fan with nobody ahead, room in the shop and pace to spare goes straight in;
    # under load the line forms as in QUEUE.
    SAFETY_NET = "safety_net", "Safety net"
    # Everyone straight in with a pass (counted and audited; no capacity, no pace).
    PASSTHROUGH = "passthrough", "Passthrough"
    # Nobody is let in and nobody may join; those already waiting keep their places.
    MAINTENANCE = "maintenance", "Maintenance"


def validate_return_host(value: str) -> None:
    if return_host_normalise(value) != value:
        raise ValidationError(
            f"{value!r} is not a host name in lower case (like shop.example.com or "
            "shop.example.com:8443; no scheme, path or wildcard)."
        )


def validate_traffic_rules(value: object) -> None:
    try:
        parse_traffic_rules(value)
    except TrafficRulesError as error:
        raise ValidationError(list(error.messages)) from None


MESSAGE_MAX_LENGTH = 500
BRANDING_TEXT_MAX_LENGTH = 2000
LOGO_MAX_BYTES = 256 * 1024
RETURN_HOSTS_MAX = 50


class EventState(models.TextChoices):
    SCHEDULED = "scheduled", "Scheduled"
    PREQUEUE = "prequeue", "Pre-queue"
    OPEN = "open", "Open"
    PAUSED = "paused", "Paused"
    CLOSED = "closed", "Closed"


class Event(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    target_url = models.URLField(
        max_length=500, help_text="The shop: admitted fans are sent here with their pass."
    )
    capacity = models.PositiveIntegerField(
        default=100,
        help_text="Most fans inside the shop at once. 0 = no cap: fans are let in at the "
        "pace only (to stop letting fans in, pause the on-sale). Set it to what the shop can "
        "serve concurrently without slowing down.",
    )
    rate_per_minute = models.PositiveIntegerField(
        default=60,
        help_text="Most fans let in per minute. 0 = no pace limit: fans are let in as fast as "
        "the capacity allows. Both caps apply together.",
    )
    session_seconds = models.PositiveIntegerField(
        default=900,
        validators=[MinValueValidator(30), MaxValueValidator(86_400)],
        help_text="How long an admitted fan's pass is valid; the slot frees when it expires.",
    )
    heartbeat_seconds = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(10), MaxValueValidator(3_600)],
        help_text="A waiting fan whose page has not been seen for this long is away (the "
        "place is kept for the away time below).",
    )
    # A phone suspends a page in the background: its fan is away, not gone. The place is kept
    # this much longer (queueing/line/away.py); admission passes over an away fan, who holds
    # no shop slot, and who goes in first in their tier when back.
    away_seconds = models.PositiveIntegerField(
        default=600,
        validators=[MaxValueValidator(86_400)],
        help_text="How long the place of a fan whose page is closed (away) is kept after the "
        "heartbeat window, before it ends as expired (0 = not kept).",
    )
    # A line past one Redis core is split in lanes by a keyed hash of the fan's identity
    # (queueing/rules/lanes.py), each with its own hash tag; admission merges them by order
    # key. Fixed once anyone is in the line: every entry's lane was drawn from it.
    lanes = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(LANES_MIN), MaxValueValidator(LANES_MAX)],
        help_text=f"How many lanes the line is split in ({LANES_MIN}-{LANES_MAX}): each lane "
        "lives on its own Redis Cluster slot, so a line too busy for one Redis core spreads "
        "over several. Fixed once anyone is in the line.",
    )
    # Fixed once anyone is in the line: every fan's place key was drawn in its order.
    queue_order = models.CharField(
        max_length=8,
        choices=QueueOrder.choices,
        default=QueueOrder.FIFO,
        # The old release's inserts leave the column out during an upgrade.
        db_default=QueueOrder.FIFO.value,
        help_text="First come, first served, or random: each fan's place is a hash of the "
        "on-sale's secret seed and their ticket, revealed when the on-sale ends so anyone can "
        "check the order. Fixed once anyone is in the line.",
    )
    max_queue_length = models.PositiveIntegerField(
        default=0, help_text="Joins are refused once this many fans wait (0 = unbounded)."
    )
    max_wait_seconds = models.PositiveIntegerField(
        default=0,
        help_text="Joins are refused when the predicted wait for a new fan exceeds this "
        "(0 = no admission control).",
    )
    max_live_per_address = models.PositiveIntegerField(
        default=0,
        help_text="Most live places (in line or in the shop) held from one client address, "
        "an IPv6 /64 counting as one (0 = no cap). Venues and mobile carriers put many fans "
        "behind one address: set it only with room to spare.",
    )
    prequeue_opens_at = models.DateTimeField(
        null=True, blank=True, help_text="When fans may start joining (empty = now)."
    )
    starts_at = models.DateTimeField(
        null=True, blank=True, help_text="When admission starts (empty = now)."
    )
    ends_at = models.DateTimeField(
        null=True, blank=True, help_text="When the on-sale closes (empty = open-ended)."
    )
    pow_difficulty = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(20)],
        help_text="Proof of work asked of each join, in leading zero bits of a SHA-256 "
        "(0 = off; 16 takes a phone about a second, and a bot farm as many CPU-seconds).",
    )
    shuffle_at_start = models.BooleanField(
        default=True,
        help_text="Fans who joined before the start are put in a random, verifiable order.",
    )
    mode = models.CharField(
        max_length=16,
        choices=EventMode.choices,
        default=EventMode.QUEUE,
        help_text="Queue: everyone waits their turn. Safety net: fans go straight in while the "
        "shop has room and nobody waits. Passthrough: everyone straight in. Maintenance: "
        "nobody in, no joins; those waiting keep their places.",
    )
    allowed_return_hosts = ArrayField(
        models.CharField(max_length=253, validators=[validate_return_host]),
        default=list,
        blank=True,
        size=RETURN_HOSTS_MAX,
        help_text="Hosts besides the target URL's that admitted fans may be sent back to (the "
        "page they first asked for), comma-separated. Any other return URL is ignored.",
    )
    reentry_seconds = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(86_400)],
        help_text="A fan whose shop session ended without completing (pass expired or "
        "abandoned) may come back to the front of their tier once within this time (0 = off).",
    )
    message = models.TextField(
        blank=True,
        default="",
        max_length=MESSAGE_MAX_LENGTH,
        # A TextField's max_length binds only its form widget: the validator binds every writer
        # (staff/services.py cleans the whole on-sale before saving).
        validators=[MaxLengthValidator(MESSAGE_MAX_LENGTH)],
        help_text="Plain text shown to everyone waiting (empty = none).",
    )
    # The on-sale's own look on the fans' pages (queueing/rules/branding.py renders and checks
    # it). Staff never send HTML: the texts are a small Markdown subset rendered with raw HTML
    # off, and the logo is a raster image kept in EventLogo, served by the room itself.
    accent_color = models.CharField(
        max_length=7,
        blank=True,
        default="",
        validators=[RegexValidator(r"^#[0-9a-fA-F]{6}$", "A colour like #1d4ed8.")],
        help_text="Buttons, links and the progress bar on the fans' pages, as #rrggbb "
        "(empty = the room's green). White text sits on it: keep the contrast at 4.5:1 or more.",
    )
    intro_text = models.TextField(
        blank=True,
        default="",
        max_length=BRANDING_TEXT_MAX_LENGTH,
        validators=[MaxLengthValidator(BRANDING_TEXT_MAX_LENGTH)],
        help_text="Shown above the line on the waiting page. Markdown: **bold**, *italic*, "
        "[links](https://…), lists and paragraphs; HTML is shown as text.",
    )
    next_steps_text = models.TextField(
        blank=True,
        default="",
        max_length=BRANDING_TEXT_MAX_LENGTH,
        validators=[MaxLengthValidator(BRANDING_TEXT_MAX_LENGTH)],
        help_text='"What happens next": shown below the line (same Markdown as the intro).',
    )
    # SHA-256 of the logo's bytes (empty = no logo): names the logo's URL, so browsers may
    # cache it for good and a new logo is a new URL.
    logo_sha256 = models.CharField(max_length=64, blank=True, default="", editable=False)
    integration_key = models.CharField(max_length=64, default=new_integration_key, editable=False)
    # Which requests a gate in front of the shop lets straight through, sends to the line or
    # refuses (events/traffic_rules.py), kept in the canonical form ``traffic_rules_json`` writes.
    traffic_rules = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_traffic_rules],
        help_text="A JSON list of rules, first match wins: each has an action (bypass, queue "
        "or block) and conditions that must all match (ip, path, header, cookie, user_agent). "
        "No match means queue.",
    )
    # The shop said the stock is gone (or staff did): the line closed at that moment, and the
    # fans' pages say so with the message below.
    sold_out_at = models.DateTimeField(null=True, blank=True, editable=False)
    sold_out_message = models.TextField(
        blank=True,
        default="",
        max_length=MESSAGE_MAX_LENGTH,
        validators=[MaxLengthValidator(MESSAGE_MAX_LENGTH)],
        editable=False,
    )
    # A shop that runs Queue-it's connector sends fans to the room as to Queue-it
    # (docs/queueit.md): the pair (customer id, event id) names this on-sale, and the secret
    # key signs the queueittoken the connector checks. Empty customer id = surface off.
    queueit_customer_id = models.CharField(
        max_length=64,
        blank=True,
        default="",
        validators=[
            RegexValidator(QUEUEIT_CUSTOMER_ID_RE, "Letters, digits and hyphens (up to 64).")
        ],
        help_text="The customer id the shop's Queue-it connector is configured with (empty = "
        "the Queue-it surface is off for this on-sale).",
    )
    queueit_event_id = models.CharField(
        max_length=64,
        blank=True,
        default="",
        validators=[
            RegexValidator(
                QUEUEIT_EVENT_ID_RE, "Lower-case letters, digits and hyphens (up to 64)."
            )
        ],
        help_text="The event (waiting room) id in the connector's configuration (empty = the "
        "slug in lower case).",
    )
    # Write-only: never in an answer, a form's initial value or the audit trail.
    queueit_secret_key = models.CharField(
        max_length=128,
        blank=True,
        default="",
        validators=[
            RegexValidator(
                r"^([\x21-\x7e]{16,128})?\Z",
                "16 to 128 printable ASCII characters, no spaces.",
            )
        ],
        help_text="The connector's secret key: 16 to 128 printable ASCII characters.",
    )
    # The pre-queue shuffle's seed stays secret until the shuffle; its SHA-256 is published
    # from creation on (event API and the event_created audit record), so nobody, staff
    # included, can pick a seed after seeing who joined.
    shuffle_seed = models.CharField(max_length=64, default=new_shuffle_seed, editable=False)
    # A registration draw's seed (queueing/line/draw.py), committed the same way from creation
    # on, revealed with the draw's result. Not the shuffle's: the draw is revealed at the
    # registration window's close, before the line starts, and the shuffle's seed would then
    # tell the pre-queue's order and a random line's places before they are drawn. The rows
    # the previous release inserts (it names no such column) draw theirs in PostgreSQL.
    draw_seed = models.CharField(
        max_length=64, default=new_shuffle_seed, db_default=SeedSQL(), editable=False
    )
    # When the line started moving: the pre-queue was shuffled (or promoted in join order).
    started_at = models.DateTimeField(null=True, blank=True, editable=False)
    control = models.CharField(
        max_length=16, choices=EventControl.choices, default=EventControl.RUNNING
    )
    closed_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Set when the hot index may disagree with PostgreSQL (a Redis write failed after a
    # commit); the maintenance task rebuilds the event's index and clears it.
    hot_index_dirty = models.BooleanField(default=False, editable=False)
    # When the ended on-sale's entries and audit trail left the database for an archive file
    # (queueing/line/archives.py); null while they are here. The row stays, so that every
    # page and API can say "archived" and name the file's digest instead of "not found".
    archived_at = models.DateTimeField(null=True, blank=True, editable=False)
    # What vouches for that file (docs/archive-format.md): {"sha256", "records", "entries",
    # "file", "heads": {"root": {"seq", "hash"}, "lanes": [{"lane", "seq", "hash"}, ...]}}.
    # Nullable: added to a live table without a default to write into every row.
    archive = models.JSONField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # Every screen, the admin's included, calls it an on-sale.
        verbose_name = "on-sale"
        verbose_name_plural = "on-sales"
        ordering = ["-created_at"]
        # The integration key lets its holder end any fan's session on the shop's behalf, so
        # seeing it is a right of its own, beyond viewing or changing the on-sale.
        permissions = [("manage_integration_key", "Can see and rotate the integration key")]
        indexes = [
            # The beat's "whose start is due" (queueing/line/activity.py) looks only at on-sales
            # that have not started: a handful, however many are configured.
            models.Index(
                fields=["starts_at"], condition=Q(started_at__isnull=True), name="event_not_started"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(control__in=EventControl.values),
                name="event_control_valid",
                violation_error_message="The control must be running, paused or closed.",
            ),
            models.CheckConstraint(
                condition=Q(ends_at__isnull=True)
                | Q(starts_at__isnull=True)
                | Q(ends_at__gt=models.F("starts_at")),
                name="event_ends_after_start",
                violation_error_message="The on-sale must end after it starts: set the end "
                "later than the start, or leave it empty.",
            ),
            models.CheckConstraint(
                condition=Q(prequeue_opens_at__isnull=True)
                | Q(starts_at__isnull=True)
                | Q(starts_at__gte=models.F("prequeue_opens_at")),
                name="event_prequeue_before_start",
                violation_error_message="The pre-queue must open before the sale starts (or "
                "at the same time): set its opening no later than the start.",
            ),
            models.CheckConstraint(
                condition=Q(heartbeat_seconds__gte=10) & Q(session_seconds__gte=30),
                name="event_timeouts_sane",
                violation_error_message="The heartbeat must be at least 10 seconds and the "
                "session at least 30 seconds.",
            ),
            # One on-sale per (customer id, event id): the pair is all a queue URL names.
            models.UniqueConstraint(
                Coalesce(NullIf("queueit_event_id", Value("")), Lower("slug")),
                "queueit_customer_id",
                condition=~Q(queueit_customer_id=""),
                name="event_queueit_ids_unique",
                violation_error_message="Another on-sale of this Queue-it customer id already "
                "has this Queue-it event id.",
            ),
            models.CheckConstraint(
                condition=Q(mode__in=EventMode.values),
                name="event_mode_valid",
                violation_error_message="The mode must be queue, safety net, passthrough or "
                "maintenance.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def shuffle_seed_sha256(self) -> str:
        return hashlib.sha256(self.shuffle_seed.encode()).hexdigest()

    @property
    def draw_seed_sha256(self) -> str:
        return hashlib.sha256(self.draw_seed.encode()).hexdigest()

    def shuffle_seed_revealed(self, *, closed: bool) -> str | None:
        """The seed, once it may be published: after the pre-queue's shuffle in a fifo line;
        in a random one, where it orders the whole line, only once the on-sale is ``closed``
        (a fan who knew it could tell where a join would land)."""
        if self.queue_order == QueueOrder.RANDOM:
            return self.shuffle_seed if closed else None
        return self.shuffle_seed if self.started_at else None

    @property
    def queueit_event_id_effective(self) -> str:
        """The event id a Queue-it queue URL names this on-sale by."""
        return self.queueit_event_id or self.slug.lower()

    def state_at(self, now: datetime) -> EventState:
        if self.control == EventControl.CLOSED or (self.ends_at and now >= self.ends_at):
            return EventState.CLOSED
        if self.prequeue_opens_at and now < self.prequeue_opens_at:
            return EventState.SCHEDULED
        if self.starts_at and now < self.starts_at:
            return EventState.PREQUEUE
        if self.control == EventControl.PAUSED:
            return EventState.PAUSED
        return EventState.OPEN


class EventLogo(models.Model):
    """The on-sale's logo, kept apart so that reading an on-sale never loads image bytes."""

    event = models.OneToOneField(
        Event, on_delete=models.CASCADE, primary_key=True, related_name="logo"
    )
    content_type = models.CharField(max_length=32)
    data = models.BinaryField()

    def __str__(self) -> str:
        return f"logo of {self.event_id}"


class Tier(models.Model):
    event = models.ForeignKey(
        Event, on_delete=models.CASCADE, related_name="tiers", verbose_name="on-sale"
    )
    name = models.CharField(max_length=64)
    priority = models.PositiveSmallIntegerField(
        default=100,
        validators=[MaxValueValidator(999)],
        help_text="Lower is served first.",
    )
    share = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(1000)],
        help_text="0 = strict priority; above 0 = weight of this tier in each admission batch "
        "among the weighted tiers, so that none starves.",
    )
    is_default = models.BooleanField(
        default=False, help_text="Fans who join without an access code go to this tier."
    )

    class Meta:
        ordering = ["priority", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["event", "name"],
                name="tier_name_unique_per_event",
                violation_error_message="Each tier of an on-sale needs a name of its own.",
            ),
            models.UniqueConstraint(
                fields=["event"],
                condition=Q(is_default=True),
                name="one_default_tier_per_event",
                violation_error_message="Only one tier can take the fans without an access "
                "code: tick “is default” on one tier at most.",
            ),
            models.CheckConstraint(
                condition=Q(priority__lte=999),
                name="tier_priority_range",
                violation_error_message="A tier's priority runs from 0 to 999.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (priority {self.priority})"


class AccessCode(models.Model):
    event = models.ForeignKey(
        Event, on_delete=models.CASCADE, related_name="access_codes", verbose_name="on-sale"
    )
    tier = models.ForeignKey(Tier, on_delete=models.CASCADE, related_name="access_codes")
    # Stored normalised (see events.validation.normalise_access_code) so that matching is exact.
    code = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["event", "code"],
                name="access_code_unique_per_event",
                violation_error_message="This access code is already used in this on-sale.",
            ),
        ]

    def __str__(self) -> str:
        return self.code
