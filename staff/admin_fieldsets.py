"""The on-sale's admin page: its settings in the groups staff look for them, with the words
they read at each group (staff/admin.py shows them)."""

from __future__ import annotations

from typing import Any

from staff.admin_queueit import QUEUEIT_FIELDSET

EVENT_FIELDSETS: tuple[tuple[str | None, dict[str, Any]], ...] = (
    (None, {"fields": ("slug", "name", "target_url")}),
    (
        "What the shop can take",
        {
            "fields": ("capacity", "rate_per_minute", "session_seconds"),
            "description": "Capacity is how many fans may be inside the shop at once; "
            "the rate is how many are let in per minute. Admission respects both. 0 means "
            "no limit, never none: capacity 0 lets fans in at the pace only. To stop "
            "letting fans in, use the Pause action (or the dashboard's Pause).",
        },
    ),
    (
        "The line",
        {
            "fields": (
                "heartbeat_seconds",
                "away_seconds",
                "lanes",
                "queue_order",
                "max_queue_length",
                "max_wait_seconds",
                "pow_difficulty",
                "max_live_per_address",
            )
        },
    ),
    ("Schedule", {"fields": ("prequeue_opens_at", "starts_at", "ends_at", "shuffle_at_start")}),
    (
        "In front of the shop",
        {
            "fields": ("mode", "allowed_return_hosts", "reentry_seconds", "message"),
            "description": "Safety net keeps the room on all the time: fans go straight "
            "in while the shop has room, and queue only under load.",
        },
    ),
    (
        "Traffic rules",
        {
            "fields": ("traffic_rules",),
            "description": "For a gate in front of the shop: bypass, queue or block, e.g. "
            '[{"action": "bypass", "path": ["/static/*"]}]. First match wins; no match '
            "queues. The trail keeps a count and a digest: values may be secrets.",
        },
    ),
    (
        "Your own look",
        {
            "fields": (
                "accent_color",
                "accent_contrast",
                "intro_text",
                "next_steps_text",
                "current_logo",
                "logo",
                "remove_logo",
            ),
            "description": "How the fans' pages look for this on-sale. Staff's texts are "
            "Markdown (bold, italic, links, lists); HTML is shown as text. Use “Preview” "
            "below to see the waiting page with these values before saving.",
        },
    ),
    QUEUEIT_FIELDSET,
    (
        "Status",
        {
            "fields": (
                "control",
                "closed_at",
                "sold_out_at",
                "sold_out_message",
                "integration_key",
                "created_at",
                "updated_at",
            )
        },
    ),
)
