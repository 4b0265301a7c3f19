# An identity's ended tickets: a random line's rejoin keeps the place of the one before if it
# was never let in.

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
                    ("status__in", ("completed", "abandoned", "expired", "left", "revoked"))
                ),
                fields=["event", "identity"],
                name="entry_ended_identity",
            ),
        ),
    ]
