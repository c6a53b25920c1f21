#!/usr/bin/env python3
"""Django's command-line utility for agentui."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentui.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        settings.INSTALLED_APPS  # noqa: B018 - load settings now to report bad ones in one line
    except ImproperlyConfigured as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
