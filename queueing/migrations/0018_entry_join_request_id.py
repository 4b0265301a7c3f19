# The X-Request-ID of the join that made each entry: nullable, so adding it rewrites nothing
# and locks the table only for the catalogue's change.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("queueing", "0017_webhooks"),
    ]

    operations = [
        migrations.AddField(
            model_name="queueentry",
            name="join_request_id",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
    ]
