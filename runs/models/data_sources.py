"""The databases an admin registered for the analysts to read (runs.presets.tools.dbsource)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models


class DataSourceKind(models.TextChoices):
    POSTGRES = "postgres", "PostgreSQL (psycopg)"
    MYSQL = "mysql", "MySQL / MariaDB (PyMySQL)"


class DataSource(models.Model):
    """A database an admin registered for the analysts to read (runs.presets.tools.dbsource):
    PostgreSQL or MySQL / MariaDB, as the URL's scheme says (`kind` follows it).

    `url` holds the password: it is a secret, shown back only masked (`masked_url`) on every
    page, REST answer, span and audit row. Queries run in a READ ONLY transaction with the
    source's `timeout_s` as the session's statement timeout, reading at most the SQL tool's row
    cap through a server-side (or unbuffered) cursor; the user in the URL should itself be
    read-only.
    """

    name = models.CharField(
        max_length=30,
        unique=True,
        validators=[
            RegexValidator(
                r"^[a-z][a-z0-9_]{0,29}$",
                "a lower-case letter, then lower-case letters, digits or _",
            )
        ],
        help_text="Short name the model and the Data page use (`warehouse`)",
    )
    description = models.CharField(
        max_length=300, blank=True, help_text="What it holds, told to the model"
    )
    kind = models.CharField(
        max_length=12, choices=DataSourceKind.choices, default=DataSourceKind.POSTGRES
    )
    url = models.CharField(
        max_length=500,
        help_text="postgresql://role:password@host:5432/database or"
        " mysql://user:password@host:3306/database (a read-only user)",
    )
    timeout_s = models.FloatField(
        default=5.0, help_text="statement_timeout of every query, in seconds"
    )
    enabled = models.BooleanField(default=True)
    everyone = models.BooleanField(
        default=False, help_text="Every user may query it (else only those granted)"
    )
    users = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="data_sources"
    )
    groups = models.ManyToManyField(
        "auth.Group", blank=True, related_name="data_sources"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "database source"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
