"""The room as a release: its licence (and the gate package's), one version shown everywhere
it is shown, a changelog in Keep a Changelog's shape, lint and the migration checks in
`make test`, and the rolling-upgrade check refusing what would break the running release."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from config.version import BUILD, VERSION, release_version
from tests.processes import ROOT, process_env

GATE = ROOT / "integrations" / "django_gate"
ROOM_PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
GATE_PROJECT = tomllib.loads((GATE / "pyproject.toml").read_text())["project"]
APACHE_2 = ("Apache License", "Version 2.0, January 2004", "END OF TERMS AND CONDITIONS")


@pytest.mark.parametrize("where", [ROOT, GATE], ids=["room", "gate"])
def test_the_licence_is_apache_2_with_our_notice(where: Path) -> None:
    licence = (where / "LICENSE").read_text()
    assert all(words in licence for words in APACHE_2)
    # The standard text, unchanged: its appendix keeps the placeholders; our name is in NOTICE.
    assert licence == (ROOT / "LICENSE").read_text()
    assert "Copyright 2026 The waiting room authors" in (where / "NOTICE").read_text()


@pytest.mark.parametrize("project", [ROOM_PROJECT, GATE_PROJECT], ids=["room", "gate"])
def test_the_projects_declare_the_licence(project: dict) -> None:
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE", "NOTICE"]


def test_the_gate_wheel_carries_the_licence(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(GATE)],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("waitingroom_django_gate-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert {n.rsplit("/", 1)[-1] for n in names if "/licenses/" in n} == {"LICENSE", "NOTICE"}
    assert b"License-Expression: Apache-2.0" in metadata


def test_one_version_in_pyproject_healthz_and_build_info(db, tmp_path, monkeypatch) -> None:
    assert ROOM_PROJECT["name"] == "waitingroom"
    assert re.fullmatch(r"\d+\.\d+\.\d+", ROOM_PROJECT["version"])
    assert VERSION == ROOM_PROJECT["version"]
    assert Client().get("/healthz").json() == {"status": "ok", "version": VERSION}
    # Both shapes of /metrics: one process, and gunicorn's several (PROMETHEUS_MULTIPROC_DIR).
    for multiprocess in (False, True):
        if multiprocess:
            monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
        text = Client().get("/metrics").content.decode()
        (info,) = [
            sample
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "waitingroom_build_info"
        ]
        assert info.value == 1
        assert info.labels == BUILD
        assert info.labels["version"] == VERSION


def test_a_process_without_a_version_refuses_to_start(tmp_path: Path) -> None:
    unnamed = tmp_path / "pyproject.toml"
    unnamed.write_text("[tool.ruff]\nline-length = 100\n")
    with pytest.raises(ImproperlyConfigured, match="no \\[project\\] version"):
        release_version(unnamed)
    with pytest.raises(ImproperlyConfigured, match="cannot read"):
        release_version(tmp_path / "missing.toml")


def test_the_image_carries_pyproject() -> None:
    """config/version.py reads it at start-up: an image without it would not start."""
    copies = [
        line.split()[1:-1]
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY") and "--from" not in line
    ]
    assert any("." in sources or "pyproject.toml" in sources for sources in copies)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert "pyproject.toml" not in ignored and "*.toml" not in ignored


def test_the_changelog_keeps_a_changelog() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    assert "https://keepachangelog.com/en/1.1.0/" in text
    assert "https://semver.org/spec/v2.0.0.html" in text
    versions = re.findall(r"^## \[(.+?)\](.*)$", text, flags=re.MULTILINE)
    assert versions[0] == ("Unreleased", "")
    released = versions[1:]
    assert released, "no release entry"
    for _, rest in released:
        assert re.fullmatch(r" - \d{4}-\d{2}-\d{2}", rest), rest
    # The newest release is the version the room says it is.
    assert released[0][0] == VERSION
    kinds = set(re.findall(r"^### (.+)$", text, flags=re.MULTILINE))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_security_and_contributing_say_what_they_must() -> None:
    security = (ROOT / "SECURITY.md").read_text()
    for words in (
        "Supported versions",
        "Reporting a vulnerability",
        "place-in-line tampering",
        "pass forgery",
        "audit chain forgery",
    ):
        assert words.lower() in security.lower(), words
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    for words in ("make run", "make test", "make lint", "lint-imports", "migrations-check"):
        assert words in contributing, words
    assert "Signed-off-by" in contributing  # the DCO


def _recipe(makefile: str, target: str) -> list[str]:
    body = makefile.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in body.splitlines()[1:] if line.startswith("\t")]


def test_make_test_lints_and_checks_migrations_before_pytest() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert _recipe(makefile, "lint") == [
        "$(VENV)/bin/ruff check .",
        "$(VENV)/bin/ruff format --check .",
    ]
    checks = _recipe(makefile, "migrations-check")
    assert "$(PY) manage.py makemigrations --check --dry-run" in checks
    assert "$(PY) scripts/check_migrations.py" in checks
    steps = _recipe(makefile, "test")
    first_pytest = next(i for i, step in enumerate(steps) if "pytest" in step)
    assert steps.index("$(MAKE) --no-print-directory lint migrations-check") < first_pytest


# The rolling-upgrade check, run as `make test` runs it, on a throwaway app of its own.

APP = "rollcheck"
INITIAL = """
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    operations = [
        migrations.CreateModel(
            "Ticket",
            [
                ("id", models.BigAutoField(primary_key=True)),
                ("name", models.CharField(max_length=20)),
                ("note", models.TextField(null=True)),
            ],
        ),
    ]
"""
HEAD = "from django.db import migrations, models\n"
# Each of these would break the release still running, or lock the table while it serves.
BAD = {
    "0002_drop_note": ("DROP_COLUMN", 'migrations.RemoveField("ticket", "note")'),
    "0003_seats": (
        "NOT_NULL",
        'migrations.AddField("ticket", "seats", models.IntegerField(default=1))',
    ),
    "0004_name_index": (
        "CREATE_INDEX",
        'migrations.AddIndex("ticket", models.Index(fields=["name"], name="t_name"))',
    ),
    "0005_raw": ("RUNSQL", 'migrations.RunSQL("SELECT 1", reverse_sql="SELECT 1")'),
    "0006_rename": ("RENAME_COLUMN", 'migrations.RenameField("ticket", "name", "title")'),
}
# The same intentions done the rolling way: expand, concurrently, reviewed.
GOOD = {
    "0002_expand": """
class Migration(migrations.Migration):
    dependencies = [("rollcheck", "0001_initial")]
    operations = [
        migrations.AddField("ticket", "seats", models.IntegerField(db_default=1)),
        migrations.AddField("ticket", "title", models.CharField(max_length=20, null=True)),
        migrations.CreateModel(
            "Seat",
            [("id", models.BigAutoField(primary_key=True)), ("row", models.IntegerField())],
            options={"indexes": [models.Index(fields=["row"], name="seat_row")]},
        ),
    ]
""",
    "0003_name_index": """
from django.contrib.postgres.operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("rollcheck", "0002_expand")]
    operations = [
        AddIndexConcurrently("ticket", models.Index(fields=["name"], name="t_name")),
    ]
""",
    "0004_contract": """
class Migration(migrations.Migration):
    reviewed_for_rolling_upgrade = {
        "DROP_COLUMN": "the release before this one stopped reading note",
        "RUNSQL": "a read, no lock",
    }
    dependencies = [("rollcheck", "0003_name_index")]
    operations = [
        migrations.RemoveField("ticket", "note"),
        migrations.RunSQL("SELECT 1", reverse_sql="SELECT 1"),
    ]
""",
}


def _run_check(root: Path, migrations: dict[str, str]) -> subprocess.CompletedProcess:
    app = root / APP
    (app / "migrations").mkdir(parents=True)
    (app / "__init__.py").write_text("")
    (app / "migrations" / "__init__.py").write_text("")
    for name, source in {"0001_initial": INITIAL, **migrations}.items():
        (app / "migrations" / f"{name}.py").write_text(HEAD + textwrap.dedent(source))
    (root / "rollcheck_settings.py").write_text(
        "from config.settings_test import *  # noqa: F403\n"
        f"INSTALLED_APPS = [*INSTALLED_APPS, {APP!r}]  # noqa: F405\n"
    )
    env = process_env(DJANGO_SETTINGS_MODULE="rollcheck_settings", PYTHONPATH=str(root))
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_migrations.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _chain(migrations: dict[str, tuple[str, str]]) -> dict[str, str]:
    chained, before = {}, "0001_initial"
    for name, (_, operation) in migrations.items():
        chained[name] = (
            "class Migration(migrations.Migration):\n"
            f"    dependencies = [({APP!r}, {before!r})]\n"
            f"    operations = [{operation}]\n"
        )
        before = name
    return chained


def test_the_current_migrations_pass_the_rolling_upgrade_check(db) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_migrations.py")],
        env=process_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 refusal(s)" in result.stdout


def test_a_migration_that_breaks_the_running_release_fails_the_check(db, tmp_path) -> None:
    result = _run_check(tmp_path, _chain(BAD))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for name, (code, _) in BAD.items():
        assert any(
            line.startswith(f"{APP}/{name}: {code}: ") and "; instead: " in line for line in lines
        ), (name, result.stdout)
    assert "docs/operations.md" in result.stdout


def test_the_rolling_way_passes_the_check(db, tmp_path) -> None:
    result = _run_check(tmp_path, GOOD)
    assert result.returncode == 0, result.stdout + result.stderr
    # The throwaway app's four (its initial one and GOOD), and the tree's own since the baseline.
    counted = re.search(r"(\d+) migration\(s\) after the baseline, 0 refusal\(s\)", result.stdout)
    assert counted is not None, result.stdout
    assert int(counted.group(1)) >= 1 + len(GOOD)


def test_a_review_must_give_its_reason(db, tmp_path) -> None:
    unexplained = GOOD["0004_contract"].replace("a read, no lock", " ")
    result = _run_check(tmp_path, {**GOOD, "0004_contract": unexplained})
    assert result.returncode == 1
    assert f"{APP}/0004_contract: RUNSQL: " in result.stdout
