"""Write the nginx configuration from its template, filling @NAME@ from the environment.

    python deploy/nginx/render.py deploy/nginx/nginx.conf.template /etc/nginx/waitingroom.conf

Every placeholder must have a non-empty value, or nothing is written: a half-filled
configuration would fail later and less clearly. The line naming @NGINX_WEB_SERVERS@ is written
once per address in that variable (space- or comma-separated), one upstream server each.

A line ``render_include <file>;`` (after the placeholders are filled, so the file may be named
by one) is replaced by that file, rendered the same way; a relative name is taken from the
template's directory. Within it, @TEMPLATE_DIR@ is that directory (the gate's policy for an
unreachable room picks its part so: gate.conf.template). Standard library only: the app image
runs it before nginx starts.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

PLACEHOLDER = re.compile(r"@([A-Z][A-Z0-9_]*)@")
REPEATED = "NGINX_WEB_SERVERS"
INCLUDE = re.compile(r"^[ \t]*render_include[ \t]+(\S+);[ \t]*$")


class MissingValues(Exception):
    pass


def placeholders(template: str) -> set[str]:
    return set(PLACEHOLDER.findall(template))


def render(template: str, values: Mapping[str, str], directory: Path | None = None) -> str:
    """``template`` filled from ``values``; ``directory``: where included files are found."""
    if directory is not None:
        values = {**values, "TEMPLATE_DIR": str(directory.resolve())}
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
    text = PLACEHOLDER.sub(lambda match: values[match.group(1)].strip(), "".join(lines))
    if directory is None:
        return text
    rendered = []
    for line in text.splitlines(keepends=True):
        included = INCLUDE.match(line)
        if included is None:
            rendered.append(line)
            continue
        path = directory / included.group(1)
        try:
            part = path.read_text()
        except OSError as error:
            raise MissingValues(f"cannot read {path}: {error.strerror}") from error
        rendered.append(render(part, values, path.parent).rstrip("\n") + "\n")
    return "".join(rendered)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source, target = Path(argv[1]), Path(argv[2])
    try:
        text = render(source.read_text(), os.environ, source.parent)
    except MissingValues as error:
        print(f"{source}: {error}", file=sys.stderr)
        return 1
    target.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
