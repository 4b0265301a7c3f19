"""What staff's Markdown may become on a page: the tags and attributes of the safe subset
(queueing/rules/branding.py), and nothing of staff's own."""

from __future__ import annotations

from html.parser import HTMLParser

from queueing.rules.branding import LINK_REL

ALLOWED_TAGS = {"p", "br", "em", "strong", "ul", "ol", "li", "a"}
ALLOWED_ATTRIBUTES = {"a": {"href", "rel", "target"}, "ol": {"start"}}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags_of(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def assert_only_the_safe_subset(html: str) -> None:
    for tag, attrs in tags_of(html):
        assert tag in ALLOWED_TAGS, (tag, html)
        assert set(attrs) <= ALLOWED_ATTRIBUTES.get(tag, set()), (tag, attrs, html)
        if tag == "a":
            href = attrs["href"] or ""
            assert href.startswith(("https://", "http://", "mailto:")), html
            assert attrs["rel"] == LINK_REL and attrs["target"] == "_blank"
        if tag == "ol":
            assert (attrs.get("start") or "1").isdigit()
