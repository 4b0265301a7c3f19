import pytest
from django.utils import translation

from queueing.rules.eta import Eta
from queueing.rules.wording import wait_range_text


@pytest.mark.parametrize(
    ("eta", "text"),
    [
        (None, "We'll show an estimate as soon as the line starts moving."),
        (Eta(5, 20, 50), "less than a minute"),
        (Eta(12 * 60 + 5, 15 * 60, 17 * 60 + 10), "about 12–18 minutes"),
        (Eta(10, 60, 100), "about 1–2 minutes"),
        (Eta(120, 120, 120), "about 2 minutes"),
        (Eta(3 * 3600, 4 * 3600, 5 * 3600), "about 3–5 hours"),
    ],
)
def test_waits_are_said_as_ranges(eta, text) -> None:
    with translation.override("en"):
        assert wait_range_text(eta) == text


def test_waits_are_translated() -> None:
    with translation.override("de"):
        assert wait_range_text(Eta(12 * 60, 15 * 60, 17 * 60 + 10)) == "etwa 12–18 Minuten"
