from django.apps import AppConfig


class RunsConfig(AppConfig):
    """The notebook app: tasks, steps and the agents that run them."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "runs"
    verbose_name = "Agent runs"

    def ready(self) -> None:
        # Demo scripts only register rules (no database access), so they are safe this early;
        # crash recovery needs the database and runs from runs.service.recovery instead.
        from runs.demo import register_demo_scripts

        register_demo_scripts()
        # an open inbox follows changes to who reviews whom (no database access here either)
        from runs.service import regroup

        regroup.connect()
