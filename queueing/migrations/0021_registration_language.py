# The language a fan registered in, which their confirmation and outcome mails speak. A
# constant db_default: no table rewrite, and the release still running inserts without it.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("queueing", "0020_entry_ended_identity"),
    ]

    operations = [
        migrations.AddField(
            model_name="registration",
            name="language",
            field=models.CharField(blank=True, db_default="", max_length=8),
        ),
    ]
