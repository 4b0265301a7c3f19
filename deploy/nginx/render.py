"""Write the nginx configuration from its template, filling @NAME@ from the environment.

    python deploy/nginx/render.py deploy/nginx/nginx.conf.template /etc/nginx/waitingroom.conf

Every placeholder must have a non-empty value, or nothing is written: a half-filled
configuration would fail later and less clearly. The line naming @NGINX_WEB_SERVERS@ is written
once per address in that variable (space- or comma-separated), one upstream server each.
Standard library only: the app image runs it before nginx starts.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

PLACEHOLDER = re.compile(r"@([A-Z][A-Z0-9_]*)@")
REPEATED = "NGINX_WEB_SERVERS"


class MissingValues(Exception):
    pass


def placeholders(template: str) -> set[str]:
    return set(PLACEHOLDER.findall(template))


def render(template: str, values: Mapping[str, str]) -> str:
    missing = sorted(name for name in placeholders(template) if not values.get(name, "").strip())
    if missing:
        raise MissingValues(f"no value for {', '.join(missing)}")
    lines = []
    for line in template.splitlines(keepends=True):
        if f"@{REPEATED}@" in line:
            servers = re.split(r"[\s,]+", values[REPEATED].strip())
            lines += [line.replace(f"@{REPEATED}@", server) for server in servers]
        else:
            lines.append(line)
    return PLACEHOLDER.sub(lambda match: values[match.group(1)].strip(), "".join(lines))


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source, target = Path(argv[1]), Path(argv[2])
    try:
        text = render(source.read_text(), os.environ)
    except MissingValues as error:
        print(f"{source}: {error}", file=sys.stderr)
        return 1
    target.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
