"""The look's pure rules: staff's Markdown becomes only the safe subset (no tag, attribute or
link scheme of staff's own), the contrast maths match WCAG's, and a logo is known by its
bytes."""

from __future__ import annotations

import pytest

from queueing.rules.branding import (
    LINK_REL,
    LogoRefused,
    accent_contrast,
    accent_is_low_contrast,
    accent_strong,
    accent_warning,
    contrast_ratio,
    logo_check,
    logo_content_type,
    markdown_render,
    page_branding,
)
from tests.images import GIF, HTML_PAGE, JPEG, SVG_WITH_SCRIPT, TINY_PNG, WEBP
from tests.markup import assert_only_the_safe_subset

ATTACKS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "<iframe src=https://evil.example></iframe>",
    "<style>body{display:none}</style>",
    '<div style="background:url(javascript:alert(1))">x</div>',
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x]( javascript:alert(1))",
    "[x](<javascript:alert(1)>)",
    "[x](java&#x09;script:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](vbscript:msgbox(1))",
    "[x](file:///etc/passwd)",
    "[x](//evil.example/)",
    "[x](/relative/path)",
    "<javascript:alert(1)>",
    "<data:text/html,hi>",
    "<vbscript:msgbox(1)>",
    "![logo](https://evil.example/track.png)",
    "![x](javascript:alert(1))",
    '[x](https://ok.example "title onmouseover=alert(1)")',
    '[x](https://ok.example"onmouseover="alert(1))',
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "&#60;script&#62;alert(1)&#60;/script&#62;",
    "# heading\n\n> quote\n\n```\ncode\n```\n\n    indented\n\n---\n\n| a | b |\n|---|---|",
    "*<b>bold</b>* **<i onclick=x>y</i>**",
    "[<img src=x onerror=alert(1)>](https://ok.example)",
    "[x][ref]\n\n[ref]: javascript:alert(1)",
]


@pytest.mark.parametrize("text", ATTACKS)
def test_staff_markup_never_becomes_a_tag_attribute_or_script_link(text: str) -> None:
    html = markdown_render(text)
    assert_only_the_safe_subset(html)
    # Staff's markup may show as text, escaped, but never as markup.
    assert "<script" not in html and "<img" not in html and "<iframe" not in html
    assert "<style" not in html and "<div" not in html


def test_raw_html_is_shown_as_text() -> None:
    assert markdown_render("<script>alert(1)</script>") == (
        "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n"
    )
    assert markdown_render("<img src=x onerror=alert(1)>") == (
        "<p>&lt;img src=x onerror=alert(1)&gt;</p>\n"
    )


def test_entities_stay_text() -> None:
    # An entity is decoded to its character, which is escaped again: text, never a tag.
    assert markdown_render("&lt;b&gt; &#60;i&#62; &amp;") == "<p>&lt;b&gt; &lt;i&gt; &amp;</p>\n"


def test_a_script_link_is_left_as_plain_text() -> None:
    assert markdown_render("[x](javascript:alert(1))") == "<p>[x](javascript:alert(1))</p>\n"
    assert markdown_render("<javascript:alert(1)>") == "<p>&lt;javascript:alert(1)&gt;</p>\n"


def test_a_markdown_image_is_never_an_image() -> None:
    html = markdown_render("![logo](https://evil.example/track.png)")
    assert "<img" not in html
    assert_only_the_safe_subset(html)


def test_the_subset_renders_what_staff_may_use() -> None:
    html = markdown_render(
        "**Presale** sold out, *general sale* at 10:00.\nSecond line.\n\n"
        "- one\n- two\n\n3. three\n4. four\n\n"
        '[Terms](https://shop.example/terms?a=1&b=2 "Terms") or <help@shop.example> or '
        "<https://shop.example/faq>"
    )
    assert "<strong>Presale</strong>" in html and "<em>general sale</em>" in html
    assert "10:00.<br>\nSecond line." in html
    assert "<ul>\n<li>one</li>\n<li>two</li>\n</ul>" in html
    assert '<ol start="3">' in html
    assert (
        f'<a href="https://shop.example/terms?a=1&amp;b=2" rel="{LINK_REL}" target="_blank">'
        "Terms</a>"
    ) in html
    assert f'<a href="mailto:help@shop.example" rel="{LINK_REL}"' in html
    assert f'<a href="https://shop.example/faq" rel="{LINK_REL}"' in html
    assert "title=" not in html
    assert_only_the_safe_subset(html)


def test_no_text_renders_nothing() -> None:
    assert markdown_render("") == "" and markdown_render("  \n ") == ""


@pytest.mark.parametrize(
    ("first", "second", "ratio"),
    [
        ("#000000", "#ffffff", 21.0),
        ("#ffffff", "#ffffff", 1.0),
        ("#767676", "#ffffff", 4.54),  # the lightest grey that passes on white
        ("#777777", "#ffffff", 4.48),
        ("#0000ff", "#ffffff", 8.59),
        ("#ff0000", "#ffffff", 4.0),
        ("#15803d", "#ffffff", 5.02),
        ("#14532d", "#ffffff", 9.11),
        ("#ffffff", "#000000", 21.0),  # order does not matter
    ],
)
def test_contrast_ratio_matches_wcag(first: str, second: str, ratio: float) -> None:
    assert contrast_ratio(first, second) == pytest.approx(ratio, abs=0.01)


def test_a_colour_below_four_and_a_half_to_one_is_low() -> None:
    assert accent_is_low_contrast("#777777") and accent_is_low_contrast("#FFCC00")
    assert not accent_is_low_contrast("#767676") and not accent_is_low_contrast("#1d4ed8")
    assert not accent_is_low_contrast("")
    warning = accent_warning("#ffcc00")
    assert warning is not None and "1.5" in warning and "4.5:1" in warning
    assert accent_warning("#1d4ed8") is None
    assert accent_contrast("#1d4ed8") == pytest.approx(6.70, abs=0.01)


def test_the_strong_shade_is_darker_and_reads_better() -> None:
    assert accent_strong("#1d4ed8") != "#1d4ed8"
    assert accent_contrast(accent_strong("#1d4ed8")) > accent_contrast("#1d4ed8")
    with pytest.raises(ValueError):
        accent_strong("red")


def test_the_page_style_only_carries_a_validated_colour() -> None:
    look = page_branding(accent="#1D4ED8", intro="", next_steps="", logo_url="")
    assert look.style == "--accent: #1d4ed8; --accent-strong: #1840b1;"
    for bad in ("red; background: url(x)", "#12345", "#1d4ed8;}", "expression(1)"):
        assert page_branding(accent=bad, intro="", next_steps="", logo_url="").style == ""
    assert page_branding(accent="", intro="", next_steps="", logo_url="").style == ""


@pytest.mark.parametrize(
    ("data", "content_type"),
    [(TINY_PNG, "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp")],
)
def test_a_logo_is_known_by_its_bytes(data: bytes, content_type: str) -> None:
    assert logo_content_type(data) == content_type
    assert logo_check(data, max_bytes=1024) == content_type


@pytest.mark.parametrize(
    "data",
    [
        SVG_WITH_SCRIPT,
        b'<?xml version="1.0"?>' + SVG_WITH_SCRIPT,
        HTML_PAGE,
        b"RIFF\x24\x00\x00\x00WAVEfmt ",  # a RIFF that is not WebP
        b"\x89PNX\r\n\x1a\n",
        b"%PDF-1.7",
    ],
)
def test_anything_else_is_refused(data: bytes) -> None:
    assert logo_content_type(data) is None
    with pytest.raises(LogoRefused, match="PNG, JPEG, GIF or WebP"):
        logo_check(data, max_bytes=1024)


def test_an_empty_or_oversized_logo_is_refused() -> None:
    with pytest.raises(LogoRefused, match="empty"):
        logo_check(b"", max_bytes=1024)
    with pytest.raises(LogoRefused, match="the most is 1 KiB"):
        logo_check(TINY_PNG + b"\x00" * 1024, max_bytes=1024)
