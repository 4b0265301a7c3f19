"""Schemathesis hooks (loaded by tests/test_api_schema.py through ``SCHEMATHESIS_HOOKS``): text
PostgreSQL cannot store, in every string of a JSON body the API is sent.

Schemathesis draws its strings from UTF-8 text, so it never sends a lone surrogate, and only
now and then a NUL. Both reach the room all the same: a JSON body may spell either as an
escape (``"\\ud800"``, ``"\\u0000"``). Here each string of a body may get one of them
inserted, as drawn or inside an http URL (some fields are links, and only a link that is one
could be kept). The body goes out as JSON with ASCII escapes (requests' ``json=``), so the
surrogates arrive as written. A NUL in a query string has a test of its own
(tests/queueing/web/test_bad_input.py): inserted here it would break the patterns and enums
of the documented parameters, which a positive run must keep.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import strategies as st

UNSTORABLE = ("\x00", "\ud800", "\udfff")
# The on-sale tests/test_api_schema.py makes: with a slug drawn at random, nearly every join
# would be answered 404 before its body is read.
FANS_EVENT = "demo"


def _spoiled(value: str) -> st.SearchStrategy[str]:
    return st.builds(
        lambda character, at: value[:at] + character + value[at:],
        st.sampled_from(UNSTORABLE),
        st.integers(min_value=0, max_value=len(value)),
    )


def _variants(value: Any) -> st.SearchStrategy:
    """``value`` as drawn, or with an unstorable character in any of its strings."""
    if isinstance(value, dict):
        return st.fixed_dictionaries({key: _variants(item) for key, item in value.items()})
    if isinstance(value, list):
        return st.tuples(*(_variants(item) for item in value)).map(list)
    if not isinstance(value, str):
        return st.just(value)
    as_link = _spoiled(value).map("https://shop.example/{}".format)
    return st.one_of(st.just(value), _spoiled(value), as_link)


@schemathesis.hook
def flatmap_body(ctx: Any, body: Any) -> st.SearchStrategy:
    return _variants(body)


@schemathesis.hook
def flatmap_path_parameters(ctx: Any, path_parameters: Any) -> st.SearchStrategy:
    """The fans' operations on an on-sale, as often on one that exists as on any other."""
    fans = ctx.operation is not None and ctx.operation.path.startswith("/api/v1/events/")
    if not fans or not isinstance(path_parameters, dict) or "slug" not in path_parameters:
        return st.just(path_parameters)
    return st.sampled_from([path_parameters, {**path_parameters, "slug": FANS_EVENT}])
