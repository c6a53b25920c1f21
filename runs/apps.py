from django.apps import AppConfig


class RunsConfig(AppConfig):
    """The notebook app: tasks, steps and the agents that run them."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "runs"
    verbose_name = "Agent runs"
