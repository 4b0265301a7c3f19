"""DRF's JSON parser, also refusing JSON nested too deeply to parse, and strings with a lone
surrogate (each a 400, not a 500)."""

from __future__ import annotations

import re
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# Half of a UTF-16 pair alone, as a "\ud800" escape spells it: no text, and no UTF-8 form.
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


class SafeJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
            # Refused as a whole, before any field sees it: PostgreSQL cannot store it, and a
            # field's error that quotes it (a choice that is not one) could not be answered.
            unanswerable = _holds_lone_surrogate(data)
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deeply.") from exc
        if unanswerable:
            raise ParseError("JSON parse error - a string holds a lone surrogate.")
        return data


def _holds_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return _LONE_SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_holds_lone_surrogate(k) or _holds_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_lone_surrogate(item) for item in value)
    return False
