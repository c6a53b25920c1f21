# The rate limit's minute starts at a person's first run, not at the calendar minute (a count
# kept per calendar minute let a test, or a person, start twice the limit across the turn of a
# minute at any moment). The counts are transient: the rows of the old form are dropped.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def drop_counts(apps, schema_editor):
    apps.get_model("runs", "RunCount").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_run_count"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(drop_counts, migrations.RunPython.noop),
        migrations.RemoveConstraint(
            model_name="runcount",
            name="run_count_unique",
        ),
        migrations.RemoveField(
            model_name="runcount",
            name="minute",
        ),
        migrations.AddField(
            model_name="runcount",
            name="window_start",
            field=models.FloatField(
                default=0.0, help_text="epoch seconds: when this minute began"
            ),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="runcount",
            name="user",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
    ]
