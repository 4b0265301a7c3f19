from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.utils import timezone

from events.models import Event
from events.services import TierSpec, event_create

DEMO_SLUG = "demo"


class Command(BaseCommand):
    help = "Create the demo on-sale (slug 'demo') and a staff user admin/admin, if missing."

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        if not user_model.objects.filter(username="admin").exists():
            user_model.objects.create_superuser("admin", "admin@example.com", "admin")
            self.stdout.write("created staff user admin / admin")
        if Event.objects.filter(slug=DEMO_SLUG).exists():
            self.stdout.write("demo on-sale exists")
            return
        event_create(
            actor="system:seed_demo",
            now=timezone.now(),
            slug=DEMO_SLUG,
            name="Demo Tour 2026: Opening Night",
            target_url=f"{settings.WR_PUBLIC_URL}/shop/demo/",
            capacity=5,
            rate_per_minute=30,
            heartbeat_seconds=60,
            tiers=[
                TierSpec(name="Fan club", priority=10, access_codes=["FAN-CLUB-123"]),
                TierSpec(name="General", priority=100),
            ],
        )
        self.stdout.write("created demo on-sale at /api/v1/events/demo")
