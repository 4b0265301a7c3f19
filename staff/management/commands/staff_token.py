"""``manage.py staff_token create|list|revoke``: API tokens for the staff and auditors' APIs
(docs/api.md, "Authentication"). ``create`` prints the token alone on standard output, once:
only its digest is kept."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from staff.api_tokens import DEFAULT_DAYS, MAX_DAYS, staff_token_create, staff_token_revoke
from staff.models import StaffToken, TokenScope


class Command(BaseCommand):
    help = "Make, list or revoke the API tokens of staff and auditors."

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="A new token, printed once.")
        create.add_argument("--user", required=True, help="The account's username.")
        create.add_argument("--scope", required=True, choices=TokenScope.values)
        create.add_argument(
            "--days",
            type=int,
            default=DEFAULT_DAYS,
            help=f"1 to {MAX_DAYS} (default {DEFAULT_DAYS}).",
        )
        create.add_argument("--label", default="", help="What the token is for.")
        listing = actions.add_parser("list", help="Tokens, newest first (never the tokens).")
        listing.add_argument("--user", help="Only this account's.")
        revoke = actions.add_parser("revoke", help="Refuse a token from now on.")
        revoke.add_argument("prefix", help="The token's prefix (list shows it).")

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()
        if options["action"] == "create":
            try:
                user = get_user_model().objects.get(username=options["user"])
            except get_user_model().DoesNotExist:
                raise CommandError(f"No account '{options['user']}'.") from None
            try:
                made = staff_token_create(
                    user=user,
                    scope=options["scope"],
                    days=options["days"],
                    label=options["label"],
                    now=now,
                )
            except ValueError as refusal:
                raise CommandError(str(refusal)) from None
            self.stderr.write(
                f"Token {made.token.prefix} for {user}: scope {made.token.scope}, expires "
                f"{made.token.expires_at:%Y-%m-%d %H:%M} UTC. Shown this once:"
            )
            self.stdout.write(made.plain)
        elif options["action"] == "list":
            tokens = StaffToken.objects.select_related("user")
            if options["user"]:
                tokens = tokens.filter(user__username=options["user"])
            for token in tokens:
                state = (
                    "revoked"
                    if token.revoked_at
                    else "expired"
                    if token.expires_at <= now
                    else "active"
                )
                used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "never"
                self.stdout.write(
                    f"{token.prefix}\t{token.user}\t{token.scope}\t{state}\t"
                    f"expires {token.expires_at:%Y-%m-%d}\tlast used {used}\t{token.label}"
                )
        else:
            token = StaffToken.objects.filter(prefix=options["prefix"]).first()
            if token is None:
                raise CommandError(f"No token with prefix '{options['prefix']}'.")
            if not staff_token_revoke(token_id=token.pk, now=now):
                raise CommandError(f"Token {token.prefix} was already revoked.")
            self.stdout.write(f"Token {token.prefix} revoked.")
