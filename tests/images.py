"""Small images made in the test (no image library): a real PNG, and the first bytes of the
other formats the room recognises, plus files that only pretend to be images."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

Pixel = tuple[int, int, int, int]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data))
        + kind
        + data
        + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def png(width: int, height: int, paint: Callable[[int, int], Pixel]) -> bytes:
    """An RGBA PNG whose pixel (x, y) is ``paint(x, y)``."""
    rows = b"".join(
        b"\x00" + b"".join(bytes(paint(x, y)) for x in range(width)) for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows, 9))
        + _chunk(b"IEND", b"")
    )


def badge_png(
    width: int = 240, height: int = 72, color: tuple[int, int, int] = (124, 58, 237)
) -> bytes:
    """A stand-in logo: a coloured disc and three bars on a transparent ground."""
    radius = height // 2 - 4

    def paint(x: int, y: int) -> Pixel:
        cx, cy = height // 2, height // 2
        if (x - cx) ** 2 + (y - cy) ** 2 <= radius**2:
            return (*color, 255)
        for i, length in enumerate((150, 110, 130)):
            top = 14 + i * 17
            if (
                height + 10 <= x < height + 10 + length * (width - height - 10) // 150
                and top <= y < top + 10
            ):
                return (31, 41, 55, 255)
        return (0, 0, 0, 0)

    return png(width, height, paint)


TINY_PNG = png(2, 2, lambda x, y: (255, 0, 0, 255))
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 64
GIF = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\x00" * 40
SVG_WITH_SCRIPT = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
    b"<script>alert(document.domain)</script></svg>"
)
HTML_PAGE = b"<!doctype html><html><body><script>alert(1)</script></body></html>"
