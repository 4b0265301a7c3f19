# Ended tickets still holding an address digest, for the retention run that erases them.

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # The index is built without blocking joins, which a transaction would forbid.
    atomic = False

    dependencies = [
        ("queueing", "0014_pass_keys_sealed"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="queueentry",
            index=models.Index(
                condition=models.Q(
                    ("address__isnull", False),
                    ("status__in", ("completed", "abandoned", "expired", "left", "revoked")),
                ),
                fields=["ended_at"],
                name="entry_ended_address",
            ),
        ),
    ]
