# The archive of an ended on-sale (queueing/line/archives.py): two nullable columns, added
# without rewriting the table.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("events", "0013_traffic_rules_sold_out_queueit"),
    ]

    operations = [
        migrations.AddField(
            model_name="event",
            name="archive",
            field=models.JSONField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="event",
            name="archived_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
    ]
