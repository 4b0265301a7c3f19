"""What a browser would send for an admin change form as it stands (every input, select and
textarea of the page's form, inline formsets included), to post it back with a few changes."""

from __future__ import annotations

from html.parser import HTMLParser

from django.test import Client


class _FormValues(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.values: dict[str, list[str]] = {}
        self._textarea: str | None = None
        self._select: str | None = None
        self._option: str | None = None
        self._option_text = ""

    def _add(self, name: str, value: str) -> None:
        self.values.setdefault(name, []).append(value)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {key: value or "" for key, value in attrs}
        name = a.get("name")
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind in ("submit", "button", "file", "image", "reset"):
                return
            if kind in ("checkbox", "radio") and "checked" not in a:
                return
            self._add(name, a.get("value", "on" if kind == "checkbox" else ""))
        elif tag == "textarea" and name:
            self._textarea = name
            self._add(name, "")
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in a:
            self._add(self._select, a.get("value", ""))

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self.values[self._textarea][-1] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea":
            if self._textarea is not None:
                # A browser drops the newline that follows <textarea>.
                value = self.values[self._textarea][-1]
                self.values[self._textarea][-1] = value.removeprefix("\n")
            self._textarea = None
        elif tag == "select":
            self._select = None


def change_form_data(client: Client, url: str) -> dict[str, list[str]]:
    page = client.get(url)
    assert page.status_code == 200, page.status_code
    parser = _FormValues()
    parser.feed(page.content.decode())
    return parser.values
