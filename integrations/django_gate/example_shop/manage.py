#!/usr/bin/env python
"""The example shop's manage.py: `python manage.py runserver 8001` (see ../README.md)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_shop.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
