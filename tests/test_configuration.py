"""docs/configuration.md is the one reference of the environment: every variable the room reads
is there, and nothing is there that the room no longer reads; every secret's ``_FILE`` variant
is named; every name in .env.example is documented. The scope is the one the page states."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "configuration.md"
PYTHON_APPS = ("config", "queueing", "events", "staff", "dashboard")
SHELL_SCRIPTS = ("scripts/run_stack.sh", "deploy/nginx/run.sh")
COMPOSE_FILES = ("docker-compose.yml", "docker-compose.cluster.yml")
NGINX_TEMPLATES = ROOT / "deploy" / "nginx"
# Filled by deploy/nginx/render.py itself, not from the environment.
RENDERER_OWN = {"TEMPLATE_DIR"}

_NAME = r"""["']([A-Z][A-Z0-9_]*)["']"""
PYTHON_READ = re.compile(
    r"(?:\benv_(?:str|int|float|bool|list|choice|secret|group_map)\(|\bos\.environ\.get\(|\bos\.environ\[|"
    r"\bgetenv\()\s*" + _NAME
)
PYTHON_SECRET = re.compile(r"\benv_secret\(\s*" + _NAME)
SHELL_READ = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(?::?[-?=+][^}]*)?\}")
PLACEHOLDER = re.compile(r"@([A-Z][A-Z0-9_]*)@")
DOCUMENTED_ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]*)` \|(?: `([A-Z][A-Z0-9_]*_FILE)`)?", re.M)
ENV_EXAMPLE_NAME = re.compile(r"^#? ?([A-Z][A-Z0-9_]*)=", re.M)


def python_reads(text: str) -> tuple[set[str], set[str]]:
    """The variables ``text`` reads, and those of them read as secrets (``env_secret``)."""
    return set(PYTHON_READ.findall(text)), set(PYTHON_SECRET.findall(text))


def read_in_scope() -> tuple[dict[str, set[str]], set[str]]:
    """Every variable read, with the files reading it; and the secrets among them."""
    reads: dict[str, set[str]] = {}
    secrets: set[str] = set()

    def found(names: set[str], path: Path) -> None:
        for name in names:
            reads.setdefault(name, set()).add(str(path.relative_to(ROOT)))

    for app in PYTHON_APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            names, secret = python_reads(path.read_text())
            found(names, path)
            secrets |= secret
    for script in (*SHELL_SCRIPTS, *COMPOSE_FILES):
        path = ROOT / script
        found(set(SHELL_READ.findall(path.read_text())), path)
    for path in sorted(NGINX_TEMPLATES.rglob("*")):
        if path.is_file() and path.suffix in {".template", ".conf"}:
            found(set(PLACEHOLDER.findall(path.read_text())) - RENDERER_OWN, path)
    return reads, secrets


def documented() -> tuple[set[str], set[str]]:
    """The variables docs/configuration.md's tables list, and the ``_FILE`` variants."""
    rows = DOCUMENTED_ROW.findall(REFERENCE.read_text())
    return {name for name, _ in rows}, {variant for _, variant in rows if variant}


def test_the_reader_finds_every_way_a_variable_is_read() -> None:
    names, secret = python_reads(
        'env_int(\n    "WR_A", 1)\nos.environ.get("WR_B")\nos.environ["WR_C"]\n'
        'os.getenv(\'WR_D\')\nenv_secret("WR_E", "")\nenv_bool(name, True)\n'
    )
    assert (names, secret) == ({"WR_A", "WR_B", "WR_C", "WR_D", "WR_E"}, {"WR_E"})
    assert set(SHELL_READ.findall('"${BIND:-x}" ${A:?set A} ${B} $C')) == {"BIND", "A", "B"}


def test_every_variable_read_is_documented() -> None:
    reads, _ = read_in_scope()
    names, _ = documented()
    missing = {name: sorted(files) for name, files in reads.items() if name not in names}
    assert not missing, f"read but not in docs/configuration.md: {missing}"


def test_every_documented_variable_is_still_read() -> None:
    reads, _ = read_in_scope()
    names, _ = documented()
    stale = sorted(names - set(reads))
    assert not stale, f"in docs/configuration.md but read nowhere: {stale}"


def test_every_secret_names_its_file_variant() -> None:
    _, secrets = read_in_scope()
    _, variants = documented()
    assert secrets, "no secret read through env_secret: the scan is broken"
    assert variants == {f"{name}_FILE" for name in secrets}


def test_every_name_in_the_env_example_is_documented() -> None:
    example = (ROOT / ".env.example").read_text()
    names, variants = documented()
    listed = set(ENV_EXAMPLE_NAME.findall(example))
    assert {"DJANGO_SECRET_KEY", "WR_PASS_KEY_ENCRYPTION_KEY"} <= listed
    assert not listed - names - variants, sorted(listed - names - variants)
    # The required ones are set, with values nobody would keep.
    for line in example.splitlines():
        if re.match(r"^[A-Z][A-Z0-9_]*=", line) and not line.startswith("DJANGO_DEBUG="):
            assert "change-me" in line or "example" in line, line
