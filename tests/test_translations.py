"""Every string of the fans' pages and their script, translated into every language the room
offers: extracted afresh from the code (so a new string fails here until it is translated, even
before anyone ran ``make messages``), with all plural forms, nothing fuzzy, and the same
placeholders as the English."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import polib
import pytest
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
# Where the fans' strings live: their pages, the page script, and the queue's own sentences
# (wait texts, refusals the page shows). The staff dashboard and admin may stay in English
# (README "Languages"), so strings found only elsewhere are not required here.
FAN_SOURCES = ("templates/base.html", "templates/queueing/", "queueing/")
LANGUAGES = [code for code, _name in settings.LANGUAGES if code != settings.LANGUAGE_CODE]
# The same arguments as `make messages`.
IGNORE = ["--ignore=.venv", "--ignore=staticfiles", "--ignore=tests", "--ignore=bench"]
KEEP = ["--no-obsolete", "--add-location=file", "-v0"]
# Python's "%(name)d" (and "%(h)02d"), as gettext and blocktranslate write them.
PLACEHOLDER = re.compile(r"%\(\w+\)[-#0 +]*\d*[sdif]")


@pytest.fixture(scope="module")
def extracted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The catalogs as ``make messages`` would leave them now: the code is copied with its
    locale folder, and makemessages (msgmerge keeps the translations) runs on the copy."""
    copy = tmp_path_factory.mktemp("project") / "project"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "staticfiles", "node_modules", "docs", "bench", "__pycache__", "*.mo"
        ),
    )
    for domain in ("django", "djangojs"):
        subprocess.run(
            [sys.executable, "manage.py", "makemessages", "-d", domain, "--all", *IGNORE, *KEEP],
            cwd=copy,
            check=True,
            capture_output=True,
            timeout=300,
        )
    return copy / "locale"


def _for_fans(entry: polib.POEntry) -> bool:
    return any(path.startswith(FAN_SOURCES) for path, _line in entry.occurrences)


def _placeholders(text: str) -> list[str]:
    return sorted(set(PLACEHOLDER.findall(text)))


def _problems(po: polib.POFile, nplurals: int) -> list[str]:
    problems = []
    for entry in po:
        if entry.obsolete or not _for_fans(entry):
            continue
        name = repr(entry.msgid)
        if "fuzzy" in entry.flags:
            problems.append(f"{name} is fuzzy")
        if entry.msgid_plural:
            forms = entry.msgstr_plural
            if sorted(forms) != list(range(nplurals)) or not all(forms.values()):
                problems.append(f"{name}: not all {nplurals} plural forms are translated")
            wanted = _placeholders(entry.msgid_plural)
            texts = list(forms.values())
        else:
            if not entry.msgstr:
                problems.append(f"{name} is not translated")
            wanted = _placeholders(entry.msgid)
            texts = [entry.msgstr]
        for text in texts:
            if text and _placeholders(text) != wanted:
                problems.append(f"{name}: placeholders {_placeholders(text)} instead of {wanted}")
    return problems


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("domain", ["django", "djangojs"])
def test_every_fan_string_is_translated(extracted: Path, lang: str, domain: str) -> None:
    path = extracted / lang / "LC_MESSAGES" / f"{domain}.po"
    assert path.exists(), f"no {domain} catalog for {lang}: run `manage.py makemessages -l {lang}`"
    po = polib.pofile(str(path))
    nplurals = int(re.search(r"nplurals=\s*(\d+)", po.metadata["Plural-Forms"])[1])
    assert _problems(po, nplurals) == [], f"run `make messages`, then translate {path.name}"
    assert any(_for_fans(entry) for entry in po)


def test_the_test_sees_a_missing_translation(extracted: Path, tmp_path: Path) -> None:
    po = polib.pofile(str(extracted / "pl" / "LC_MESSAGES" / "django.po"))
    plural = next(e for e in po if e.msgid == "about %(n)d minute")
    plural.msgstr_plural[2] = ""
    single = next(e for e in po if e.msgid == "Your place")
    single.flags.append("fuzzy")
    ranged = next(e for e in po if e.msgid == "about %(low)d–%(high)d minutes")
    ranged.msgstr = "około %(low)d minut"
    assert _problems(po, 4) == [
        "'about %(n)d minute': not all 4 plural forms are translated",
        "'about %(low)d–%(high)d minutes': placeholders ['%(low)d'] instead of "
        "['%(high)d', '%(low)d']",
        "'Your place' is fuzzy",
    ]


def test_the_committed_catalogs_are_compiled_from_these_sources() -> None:
    # Deployments use the committed .mo files (the image does not run compilemessages).
    for lang in LANGUAGES:
        for domain in ("django", "djangojs"):
            po = ROOT / "locale" / lang / "LC_MESSAGES" / f"{domain}.po"
            mo = po.with_suffix(".mo")
            assert mo.exists(), f"{mo} missing: run `make messages`"
            compiled = {
                (e.msgid, e.msgstr or tuple(sorted(e.msgstr_plural.items())))
                for e in polib.mofile(str(mo))
                if e.msgid
            }
            written = {
                (e.msgid, e.msgstr or tuple(sorted(e.msgstr_plural.items())))
                for e in polib.pofile(str(po))
                if e.msgid and e.translated() and not e.obsolete
            }
            assert written <= compiled, f"{mo} is stale: run `make messages`"
