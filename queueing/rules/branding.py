"""An on-sale's branding (its own look) on the fans' pages (docs/api.md, "Your own look").
Pure: no I/O.

Staff never put HTML or script on the fans' pages. Their texts are a small Markdown subset
rendered here with raw HTML off: paragraphs, line breaks, emphasis, lists and links to
http(s) or mailto, and nothing else; this module is the only place that marks staff's words
safe. Their logo is a raster image recognised by its first bytes, never by its name or the
type a browser claimed. Their colour is checked for contrast against the white text and card
it sits with (WCAG 2.x), which staff are warned about, not refused.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

# What staff's text may become: nothing else is enabled (no headings, images, code, tables,
# block quotes or raw HTML, which the renderer shows as text).
_BLOCK_RULES = ["list"]
_INLINE_RULES = ["newline", "escape", "emphasis", "link", "autolink", "entity"]
# A link leaves for an absolute http(s) address with a host, or an e-mail address; never
# javascript:, data:, vbscript:, file: or a relative path on the room's own host.
_SAFE_LINK = re.compile(r"^(https?://[^/\s\\]|mailto:[^\s:/\\]+@)", re.IGNORECASE)
# Links open in a new tab, so the waiting page (and the place it keeps alive) stays open;
# the page it opens gets neither a handle on ours nor our address, and no ranking credit.
LINK_REL = "noopener noreferrer nofollow"


def _link_is_safe(url: str) -> bool:
    return bool(_SAFE_LINK.match(url))


def _link_open(
    renderer: RendererHTML,
    tokens: Sequence[Token],
    idx: int,
    options: OptionsDict,
    env: EnvType,
) -> str:
    token = tokens[idx]
    # Only the address survives from staff's link (no title): the rest is ours.
    token.attrs = {
        "href": token.attrGet("href") or "",
        "rel": LINK_REL,
        "target": "_blank",
    }
    return renderer.renderToken(tokens, idx, options, env)


@functools.cache
def _markdown() -> MarkdownIt:
    md = MarkdownIt("zero", {"html": False, "linkify": False, "typographer": False, "breaks": True})
    md.enable(_BLOCK_RULES).enable(_INLINE_RULES)
    md.validateLink = _link_is_safe  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    return md


@functools.lru_cache(maxsize=512)
def markdown_render(text: str) -> SafeString:
    """Staff's text as HTML of the safe subset ("" for none). Cached: a page load renders
    the same few texts again and again."""
    if not text.strip():
        return mark_safe("")
    # Safe because the renderer escapes every character of staff's text and emits only the
    # tags of the rules enabled above, with attributes it builds itself (tests prove it).
    return mark_safe(_markdown().render(text))


# --- colour --------------------------------------------------------------------------------

ACCENT_PATTERN = re.compile(r"^#[0-9a-fA-F]{6}$")
WHITE = "#ffffff"
# WCAG 2.x, success criterion 1.4.3: normal text needs 4.5:1. White button labels sit on the
# accent, and accent links on the white card, so one ratio covers both.
MIN_CONTRAST = 4.5


def _channels(color: str) -> tuple[int, int, int]:
    if not ACCENT_PATTERN.match(color):
        raise ValueError(f"not a #rrggbb colour: {color!r}")
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def _linear(channel: int) -> float:
    c = channel / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def relative_luminance(color: str) -> float:
    r, g, b = (_linear(c) for c in _channels(color))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(first: str, second: str) -> float:
    """WCAG contrast ratio of two #rrggbb colours, from 1 (none) to 21 (black on white)."""
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def accent_contrast(accent: str) -> float:
    """How the accent stands against white (the button labels on it, the card under links)."""
    return contrast_ratio(accent, WHITE)


def accent_is_low_contrast(accent: str) -> bool:
    # Compared on the ratio as displayed (two decimals), so "4.50:1" is never called too low.
    return bool(accent) and round(accent_contrast(accent), 2) < MIN_CONTRAST


def accent_warning(accent: str) -> str | None:
    """What staff are told about a colour too light for white text, or None."""
    if not accent_is_low_contrast(accent):
        return None
    return (
        f"The accent colour {accent} has a contrast of {accent_contrast(accent):.2f}:1 with "
        f"white; text on it needs {MIN_CONTRAST}:1 to be easy to read. Pick a darker colour."
    )


def accent_strong(accent: str, *, darken: float = 0.18) -> str:
    """A darker shade of the accent for hover, focus and pressed states (mixed with black,
    so it keeps the hue and only gains contrast against white)."""
    r, g, b = (round(c * (1 - darken)) for c in _channels(accent))
    return f"#{r:02x}{g:02x}{b:02x}"


# --- logo ----------------------------------------------------------------------------------


class LogoRefused(ValueError):
    """An uploaded logo the room will not serve; the message says why, for staff."""


# Raster formats every browser shows, by their signatures. SVG is refused: it is a document
# that can carry script, whatever it is named.
_SIGNATURES: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
)
LOGO_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def logo_content_type(data: bytes) -> str | None:
    """The image type ``data`` starts with (PNG, JPEG, GIF or WebP), or None."""
    for signature, offset, content_type in _SIGNATURES:
        if data[offset : offset + len(signature)] == signature:
            return content_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def logo_check(data: bytes, *, max_bytes: int) -> str:
    """The content type the logo will be served with; LogoRefused when it is empty, too
    large, or not a PNG, JPEG, GIF or WebP image by its own bytes."""
    if not data:
        raise LogoRefused("The logo file is empty.")
    if len(data) > max_bytes:
        raise LogoRefused(
            f"The logo is {len(data) // 1024} KiB; the most is {max_bytes // 1024} KiB."
        )
    content_type = logo_content_type(data)
    if content_type is None:
        raise LogoRefused(
            "The logo must be a PNG, JPEG, GIF or WebP image (SVG and other files are refused, "
            "whatever their name)."
        )
    return content_type


# --- the page ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PageBranding:
    """What the fans' pages need of an on-sale's look; empty fields keep the room's own."""

    accent: str
    accent_strong: str
    intro_html: SafeString
    next_steps_html: SafeString
    logo_url: str
    accent_warning: str | None

    @property
    def style(self) -> str:
        """The page's custom properties, set inline on its body (CSP allows inline styles);
        built only from colours that matched #rrggbb, so nothing else reaches the page."""
        if not self.accent:
            return ""
        return f"--accent: {self.accent}; --accent-strong: {self.accent_strong};"


def page_branding(*, accent: str, intro: str, next_steps: str, logo_url: str) -> PageBranding:
    # A colour that is not #rrggbb (never stored: the model validates it) falls back to the
    # room's own rather than reaching the page's style.
    accent = accent.lower() if ACCENT_PATTERN.match(accent or "") else ""
    return PageBranding(
        accent=accent,
        accent_strong=accent_strong(accent) if accent else "",
        intro_html=markdown_render(intro or ""),
        next_steps_html=markdown_render(next_steps or ""),
        logo_url=logo_url,
        accent_warning=accent_warning(accent) if accent else None,
    )
