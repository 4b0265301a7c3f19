"""What the Queue-it tests share (tests/queueing/web/test_queueit.py in process,
tests/test_queueit_connector.py with the real connector): the waiting page's config, and the
token a redirect carries."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit


def page_config(html: str) -> Any:
    """The waiting page's own config (its ``wr-config`` script element)."""
    raw = re.search(r'<script id="wr-config" type="application/json">(.*?)</script>', html, re.S)
    assert raw is not None, html[:500]
    return json.loads(raw.group(1))


def token_of(location: str) -> str:
    """The ``queueittoken`` of a redirect's URL."""
    return parse_qs(urlsplit(location).query)["queueittoken"][0]
