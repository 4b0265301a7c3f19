"""Refuses a migration that would lock a busy table or break the release still running while
it is applied (docs/operations.md, "Upgrades without downtime").

    python scripts/check_migrations.py

During a roll-out the new release's migrations run first, while the old release still serves
fans: a migration must keep the old release's reads and writes working, and must not hold a
lock that stops the line. Each migration not in ``scripts/migrations_baseline.txt`` is turned
into its SQL (``sqlmigrate``) and judged by django-migration-linter, with these as errors:

- dropping or renaming a column or a table (the old release still uses it);
- a column made NOT NULL that rows the old release inserts would leave empty (``AddField``
  without ``db_default``, ``AlterField`` to NOT NULL);
- changing a column's type, adding a unique constraint, a CHECK constraint validated at once
  (a table rewrite or scan under an exclusive lock);
- building or dropping an index without ``CONCURRENTLY`` on a table that already exists
  (``AddIndexConcurrently`` / ``RemoveIndexConcurrently`` in a migration with
  ``atomic = False``): PostgreSQL blocks writes to the table while it builds, and the entries
  and audit tables take writes every second of an on-sale;
- ``RunSQL``, which no check can judge.

A migration that does one of these on purpose (the contract step of an expand/contract, a
reviewed statement) names each refusal it accepts, with the reason, on its class::

    reviewed_for_rolling_upgrade = {"DROP_COLUMN": "1.1.0 stopped reading it (expand in 0014)"}

It needs the database the settings name (the linter reads which migrations are applied).
Exit status 1 with one line per refusal; 0 when every new migration passes.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "scripts" / "migrations_baseline.txt"
REVIEWED = "reviewed_for_rolling_upgrade"

sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()
# The linter says at INFO level each migration it turns into SQL: this check says what matters.
logging.getLogger("django_migration_linter").setLevel(logging.WARNING)

from django.apps import apps  # noqa: E402
from django.db import DatabaseError  # noqa: E402
from django.db.migrations import Migration, RunSQL  # noqa: E402
from django_migration_linter import MigrationLinter  # noqa: E402
from django_migration_linter.sql_analyser import PostgresqlAnalyser  # noqa: E402
from django_migration_linter.sql_analyser.analyser import analyse_sql_statements  # noqa: E402
from django_migration_linter.sql_analyser.base import (  # noqa: E402
    Check,
    CheckMode,
    CheckType,
    Issue,
)

# The linter's warnings that lock a busy table: refused here like its errors.
LOCKING_WARNINGS = {"CREATE_INDEX", "CREATE_INDEX_EXCLUSIVE", "DROP_INDEX", "REINDEX"}

# What to do instead, per refusal (the linter's message says what was found).
INSTEAD = {
    "DROP_COLUMN": "stop using it in one release, drop it in the next (reviewed)",
    "DROP_TABLE": "stop using it in one release, drop it in the next (reviewed)",
    "RENAME_COLUMN": "add the new column, write both, switch reads, drop the old one later",
    "RENAME_TABLE": "add the new table, write both, switch reads, drop the old one later",
    "NOT_NULL": "give the column a db_default (the old release's inserts leave it out), "
    "or make it nullable",
    "ALTER_COLUMN": "add a column of the new type and move to it over two releases",
    "ADD_UNIQUE": "build the unique index with AddIndexConcurrently (atomic = False) first",
    "ADD_CHECK": "add it NOT VALID and VALIDATE CONSTRAINT it in a later migration (RunSQL, "
    "reviewed)",
    "CREATE_INDEX": "use AddIndexConcurrently in a migration with atomic = False",
    "CREATE_INDEX_EXCLUSIVE": "use AddIndexConcurrently in a migration of its own, atomic = False",
    "DROP_INDEX": "use RemoveIndexConcurrently in a migration with atomic = False",
    "REINDEX": "REINDEX CONCURRENTLY, outside a migration",
    "RUNSQL": "say in reviewed_for_rolling_upgrade why the statement is safe while the old "
    "release runs",
}


def _adds_validated_check(sql_statements: list[str], **kwargs: object) -> bool:
    """A CHECK constraint added to a table that exists already, validated at once: every row
    is read under an ACCESS EXCLUSIVE lock."""
    for sql in sql_statements:
        found = re.search(r"ALTER TABLE (\S+) ADD CONSTRAINT .* CHECK", sql)
        if found and "NOT VALID" not in sql:
            table = found.group(1)
            return not any(s.startswith(f"CREATE TABLE {table}") for s in sql_statements)
    return False


class RollingUpgradeAnalyser(PostgresqlAnalyser):
    migration_checks = [
        *PostgresqlAnalyser.migration_checks,
        Check(
            code="ADD_CHECK",
            fn=_adds_validated_check,
            message="ADDING a CHECK constraint validated at once",
            mode=CheckMode.TRANSACTION,
            type=CheckType.ERROR,
        ),
    ]


@dataclass(frozen=True)
class Refusal:
    app_label: str
    name: str
    code: str
    message: str

    def __str__(self) -> str:
        instead = INSTEAD.get(self.code, "")
        return f"{self.app_label}/{self.name}: {self.code}: {self.message}" + (
            f"; instead: {instead}" if instead else ""
        )


def baseline(path: Path = BASELINE) -> set[tuple[str, str]]:
    lines = (line.strip() for line in path.read_text().splitlines())
    return {tuple(line.split()) for line in lines if line and not line.startswith("#")}


def _described(issue: Issue) -> str:
    where = ", ".join(
        f"{what}: {value}"
        for what, value in (("table", issue.table), ("column", issue.column))
        if value
    )
    return f"{issue.message} ({where})" if where else issue.message


def refusals(linter: MigrationLinter, migration: Migration) -> tuple[list[Refusal], list[str]]:
    """What refuses one migration, and the linter's warnings that do not."""
    try:
        sql = linter.get_sql(migration.app_label, migration.name)
    except (ValueError, DatabaseError) as exc:
        # sqlmigrate reads constraint names from the database for some operations (dropping a
        # foreign key): where the database is already past the migration, it cannot.
        reason = f"cannot be turned into SQL here ({exc}); run the check on a database before it"
        return [Refusal(migration.app_label, migration.name, "SQL", reason)], []
    errors, _, warnings = analyse_sql_statements(RollingUpgradeAnalyser, sql)
    data_errors, _, data_warnings = linter.analyse_data_migration(migration)
    errors += data_errors + [w for w in warnings if w.code in LOCKING_WARNINGS]
    warnings = [w for w in warnings + data_warnings if w.code not in LOCKING_WARNINGS]
    errors += [
        Issue(code="RUNSQL", message=f"RunSQL: {str(op.sql)[:60]!r}...")
        for op in migration.operations
        if isinstance(op, RunSQL)
    ]
    reviewed: dict[str, str] = getattr(migration, REVIEWED, {})
    found = [
        Refusal(migration.app_label, migration.name, issue.code, _described(issue))
        for issue in errors
        if not str(reviewed.get(issue.code, "")).strip()
    ]
    return found, [f"{migration.app_label}/{migration.name}: {w.message}" for w in warnings]


def _project_apps() -> set[str]:
    """The labels of the apps that are not installed packages (Django's own and libraries'
    migrations are theirs to judge)."""
    installed = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    return {
        config.label
        for config in apps.get_app_configs()
        if not any(Path(config.path).resolve().is_relative_to(where) for where in installed)
    }


def check() -> int:
    linter = MigrationLinter(no_cache=True, no_output=True)
    known = baseline()
    ours = _project_apps()
    new = sorted(
        (key, migration)
        for key, migration in linter.migration_loader.disk_migrations.items()
        if key not in known and key[0] in ours
    )
    found: list[Refusal] = []
    for _, migration in new:
        refused, warnings = refusals(linter, migration)
        found += refused
        for warning in warnings:
            print(f"warning: {warning}")
    for refusal in found:
        print(refusal)
    print(
        f"{len(new)} migration(s) after the baseline, {len(found)} refusal(s)"
        + (" (docs/operations.md, 'Upgrades without downtime')" if found else "")
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(check())
