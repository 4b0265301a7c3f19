"""The fans' pages in ten languages, as the server renders them: picked from Accept-Language or
the switcher, <html lang dir>, figures grouped as the language groups them, plurals by the
language's own rule, and the script's catalog for the page's language."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.contrib.humanize.templatetags.humanize import intcomma
from django.test import Client
from django.utils import translation

from queueing.rules.eta import Eta
from queueing.rules.wording import wait_range_text

pytestmark = pytest.mark.django_db


def _waiting(make_event, lang: str, **fields) -> str:
    event = make_event(capacity=0, rate_per_minute=60, **fields)
    fan = Client(headers={"accept-language": lang})
    fan.post(f"/e/{event.slug}/")
    return fan.get(f"/e/{event.slug}/").content.decode()


@pytest.mark.parametrize(
    ("accept", "lang", "direction", "said"),
    [
        ("ja,en;q=0.5", "ja", "ltr", "次はあなたの番です！"),  # noqa: RUF001 (Japanese's own exclamation mark)
        ("ar", "ar", "rtl", "أنت التالي!"),
        ("pl-PL,pl;q=0.9", "pl", "ltr", "Jesteś następny!"),
        ("pt-BR", "pt", "ltr", "Você é o próximo!"),
        ("fr-CH, de;q=0.5", "fr", "ltr", "Vous êtes le prochain\u202f!"),
        ("sv", "en", "ltr", "You're next!"),  # not offered: English
    ],
)
def test_the_page_speaks_the_browsers_language(make_event, accept, lang, direction, said) -> None:
    html = _waiting(make_event, accept)
    assert f'<html lang="{lang}" dir="{direction}">' in html
    assert said in html.replace("&#x27;", "'")
    assert f'src="/i18n/catalog/{lang}.js"' in html


def test_the_switcher_names_each_language_in_itself_and_comes_back_here(make_event) -> None:
    html = _waiting(make_event, "de")
    form = re.search(r'<form class="languages".*?</form>', html, re.S).group(0)
    assert 'action="/i18n/setlang/"' in form and 'method="post"' in form
    assert 'name="csrfmiddlewaretoken"' in form  # works without JavaScript: a plain form
    assert '<input type="hidden" name="next" value="/e/onsale/">' in form
    assert '<label for="language">Sprache</label>' in form
    assert '<button type="submit">Sprache wechseln</button>' in form
    options = re.findall(
        r'<option value="(\w+)" lang="(\w+)" dir="(\w+)"( selected)?>([^<]+)<', form
    )
    assert [(code, name) for code, _lang, _dir, _sel, name in options] == settings.LANGUAGES
    assert [name for *_, name in options][2:] == [
        "Français",
        "Español",
        "Italiano",
        "Nederlands",
        "Polski",
        "Português",
        "日本語",
        "العربيّة",
    ]
    assert all(code == lang for code, lang, *_ in options)
    assert [code for code, _l, _d, selected, _n in options if selected] == ["de"]
    assert [code for code, _l, direction, *_ in options if direction == "rtl"] == ["ar"]


def test_switching_language_sticks_over_the_browsers_and_goes_back_to_the_page(
    make_event,
) -> None:
    event = make_event(capacity=0, rate_per_minute=60)
    fan = Client(headers={"accept-language": "de"})
    fan.post(f"/e/{event.slug}/")
    answer = fan.post("/i18n/setlang/", {"language": "pl", "next": f"/e/{event.slug}/"})
    assert (answer.status_code, answer["Location"]) == (302, f"/e/{event.slug}/")
    cookie = answer.cookies[settings.LANGUAGE_COOKIE_NAME]
    assert cookie.value == "pl"
    # Not readable by scripts, not sent along from other sites' forms.
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    html = fan.get(f"/e/{event.slug}/").content.decode()
    assert '<html lang="pl" dir="ltr">' in html and "Jesteś następny!" in html


def test_the_switcher_never_sends_the_fan_off_site(make_event) -> None:
    answer = Client().post("/i18n/setlang/", {"language": "ja", "next": "https://evil.example/"})
    assert answer.status_code == 302 and "evil.example" not in answer["Location"]


def test_the_switcher_needs_its_csrf_token() -> None:
    answer = Client(enforce_csrf_checks=True).post("/i18n/setlang/", {"language": "ja"})
    assert answer.status_code == 403


@pytest.mark.parametrize(
    ("lang", "grouped"),
    [
        ("en", "12,345"),
        ("de", "12.345"),
        ("fr", "12\u202f345"),  # CLDR's narrow no-break space, as the browser writes it
        ("es", "12.345"),
        ("it", "12.345"),
        ("nl", "12.345"),
        ("pl", "12\u00a0345"),
        ("pt", "12.345"),
        ("ja", "12,345"),
        ("ar", "12,345"),  # Latin digits, grouped as CLDR groups them with Latin digits
    ],
)
def test_figures_are_grouped_as_the_language_groups_them(lang, grouped) -> None:
    with translation.override(lang):
        assert intcomma(12345) == grouped


def test_the_page_writes_its_figures_grouped(make_event) -> None:
    html = _waiting(make_event, "fr")
    assert re.search(r'<dd id="position">1</dd>', html)
    with translation.override("fr"):
        assert intcomma(1234) == "1\u202f234"  # four digits grouped too, as the script does


@pytest.mark.parametrize(
    ("minutes", "said"),
    [
        (2, "mniej więcej 2 minuty"),
        (5, "mniej więcej 5 minut"),
        (22, "mniej więcej 22 minuty"),
        (12, "mniej więcej 12 minut"),
    ],
)
def test_polish_waits_take_the_right_plural(minutes, said) -> None:
    with translation.override("pl"):
        assert wait_range_text(Eta(minutes * 60, minutes * 60, minutes * 60)) == said


@pytest.mark.parametrize(
    ("minutes", "said"),
    [
        (2, "حوالي 2 دقيقتين"),
        (3, "حوالي 3 دقائق"),
        (11, "حوالي 11 دقيقة"),
        (100, "حوالي 100 دقيقة"),
    ],
)
def test_arabic_waits_take_the_right_plural(minutes, said) -> None:
    with translation.override("ar"):
        assert wait_range_text(Eta(minutes * 60, minutes * 60, minutes * 60)) == said


def test_japanese_has_one_form() -> None:
    with translation.override("ja"):
        assert wait_range_text(Eta(60, 60, 60)) == "1分未満"
        assert wait_range_text(Eta(300, 300, 300)) == "約5分"
        assert wait_range_text(Eta(8 * 3600, 8 * 3600, 8 * 3600)) == "約8時間"


def test_the_script_catalog_carries_the_languages_plural_rule_and_forms() -> None:
    answer = Client().get("/i18n/catalog/pl.js")
    body = answer.content.decode()
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/javascript")
    assert "n%10>=2 && n%10<=4" in body  # Polish's own Plural-Forms, not English's n != 1
    assert '"mniej wi\\u0119cej %(n)d minuty"' in body
    assert '"mniej wi\\u0119cej %(n)d minut"' in body
    assert "public" in answer["Cache-Control"] and answer["Content-Language"] == "pl"
    # Only the room's script strings: not the admin's, nor every installed app's.
    assert "Django administration" not in body and len(body) < 20_000


def test_the_script_catalog_follows_its_path_not_the_browser() -> None:
    body = Client(headers={"accept-language": "de"}).get("/i18n/catalog/ja.js").content.decode()
    assert "\\u7d04%(n)d\\u5206" in body  # 約%(n)d分
    assert Client().get("/i18n/catalog/xx.js").status_code == 404
    assert Client().post("/i18n/catalog/ja.js").status_code == 405


def test_refusals_the_page_shows_are_translated() -> None:
    # Marked with gettext_noop where they are made (queueing/rules/states.py); the page
    # translates them (templates/queueing/waiting.html), the API says them in English.
    with translation.override("es"):
        assert translation.gettext("This ticket has already gone back in line once.") == (
            "Este ticket ya volvió a la fila una vez."
        )
