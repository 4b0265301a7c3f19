# Ended tickets that were never let in, by identity: a random line's rejoin keeps the place of
# the identity's first one.

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # The index is built without blocking joins, which a transaction would forbid.
    atomic = False

    dependencies = [
        ("queueing", "0019_registrations"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="queueentry",
            index=models.Index(
                condition=models.Q(
                    ("admitted_at__isnull", True),
                    ("status__in", ("completed", "abandoned", "expired", "left", "revoked")),
                ),
                fields=["event", "identity"],
                name="entry_ended_unadmitted",
            ),
        ),
    ]
