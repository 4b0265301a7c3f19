from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from events.models import Event
from staff.services import TierSpec, event_create

DEMO_SLUG = "demo"
DEMO_BANNER = "DEMO MODE: DEBUG on, login admin/admin, do not expose"


class Command(BaseCommand):
    help = (
        "Create the demo on-sale (slug 'demo') and a staff user admin/admin, if missing. "
        "For the local demo only: refused when DEBUG is off unless --force."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--force",
            action="store_true",
            help="Seed even with DEBUG off (a staff user admin/admin on a production room).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # A production room (DEBUG off) must never get a staff login anyone can guess by
        # accident: create real staff there with `manage.py createsuperuser`.
        if not settings.DEBUG and not options["force"]:
            raise CommandError(
                "seed_demo creates the staff login admin/admin and is for the local demo "
                "(DJANGO_DEBUG on). With DEBUG off, use `manage.py createsuperuser`; "
                "pass --force to seed the demo anyway."
            )
        user_model = get_user_model()
        if not user_model.objects.filter(username="admin").exists():
            user_model.objects.create_superuser("admin", "admin@example.com", "admin")
            self.stdout.write("created staff user admin / admin")
        if Event.objects.filter(slug=DEMO_SLUG).exists():
            self.stdout.write("demo on-sale exists")
        else:
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
        if settings.DEBUG:
            self.stdout.write(self.style.WARNING(DEMO_BANNER))
        else:
            self.stdout.write(
                self.style.WARNING(
                    "DEMO DATA WITH DEBUG OFF: staff login admin/admin exists; change its "
                    "password now (manage.py changepassword admin)."
                )
            )
