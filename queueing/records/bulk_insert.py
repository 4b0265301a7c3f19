"""Inserting many rows with one statement whose text does not grow with the rows.

``bulk_create`` writes ``VALUES (...), (...), ...``: a statement as long as the batch, which
psycopg parses anew on every call (its statement cache only keeps short ones), and each value
goes through the ORM. On the join path, under the audit chain's lock, that cost several times
the database's own work (measured in docs/benchmarks.md). Here every column is sent as one
array and the rows come out of ``unnest``: the statement is the same for every batch size.

Rows whose inserts return nothing can go by ``COPY`` instead (``copy_rows``): PostgreSQL
writes them to the table a page at a time. For 200 audit records it took 2.4 ms where the
``unnest`` insert took 6.0 ms (the median of ten each, alternating, on this machine), and
those are written under a chain head's lock.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection, models

# Types whose Python values psycopg adapts itself, exactly as the field would prepare them
# (the per-value call through the field cost more than the database's work for them).
_PASSED_AS_IS = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "BigIntegerField",
        "CharField",
        "DateTimeField",
        "FloatField",
        "ForeignKey",
        "IntegerField",
        "OneToOneField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "SmallIntegerField",
        "TextField",
        "UUIDField",
    }
)
_SIZE = re.compile(r"\(.*\)")


@functools.cache
def _statement(
    model: type[models.Model], fields: tuple[str, ...], returning: tuple[str, ...]
) -> str:
    meta = model._meta
    quote = connection.ops.quote_name
    columns = [meta.get_field(name) for name in fields]
    aliases = [f"c{i}" for i in range(len(columns))]
    # Arrays of the unsized type ("varchar", not "varchar(64)"): an explicit cast to a
    # sized type would cut a long value short, the column's own check refuses it.
    arrays = ", ".join(f"%s::{_SIZE.sub('', field.db_type(connection))}[]" for field in columns)
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in columns)}) "
        f"SELECT {', '.join(aliases)} FROM ("
        f"SELECT * FROM unnest({arrays}) WITH ORDINALITY AS given({', '.join(aliases)}, n) "
        # In the order given, so that defaults drawn from sequences follow it.
        "ORDER BY n) AS ordered"
    )
    if returning:
        sql += " RETURNING " + ", ".join(quote(meta.get_field(name).column) for name in returning)
    return sql


def insert_rows(
    model: type[models.Model],
    fields: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    returning: Sequence[str] = (),
) -> list[tuple[Any, ...]]:
    """Insert ``rows`` (values in the order of ``fields``) into ``model``'s table, in order;
    the ``returning`` columns of each inserted row, in the same order."""
    if not rows:
        return []
    meta = model._meta
    columns = [meta.get_field(name) for name in fields]
    params = [
        [row[index] for row in rows]
        if field.get_internal_type() in _PASSED_AS_IS
        else [field.get_db_prep_save(row[index], connection) for row in rows]
        for index, field in enumerate(columns)
    ]
    sql = _statement(model, tuple(fields), tuple(returning))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [tuple(row) for row in cursor.fetchall()] if returning else []


def copy_rows(
    model: type[models.Model], fields: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """Insert ``rows`` (values in the order of ``fields``, each as psycopg adapts it: no
    field's own preparation) into ``model``'s table with ``COPY``, in order."""
    meta = model._meta
    quote = connection.ops.quote_name
    columns = ", ".join(quote(meta.get_field(name).column) for name in fields)
    with (
        connection.cursor() as cursor,
        cursor.copy(f"COPY {quote(meta.db_table)} ({columns}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)
