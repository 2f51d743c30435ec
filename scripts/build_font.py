"""Build ``gencoord_env/data/font.json``: the bitmap font the episode pictures write their text in.

Every printable ASCII character of DejaVu Sans Mono (the font matplotlib ships; DejaVu's licence lets its
glyphs be copied and changed) drawn with Pillow at ``SIZE`` points into a ``WIDTH`` x ``HEIGHT`` cell and
cut at half intensity: one row of bits per pixel row, written as hex. The package draws text from this
table with numpy alone (``gencoord_env.envs.gencoord.picture.write``). Run from the repository root with
matplotlib and Pillow installed:

    python scripts/build_font.py
"""
from __future__ import annotations

import json
import string
from pathlib import Path

import matplotlib
from PIL import Image, ImageDraw, ImageFont

WIDTH, HEIGHT, SIZE = 7, 13, 11
CHARS = "".join(c for c in string.printable if c.isprintable())


def glyph_rows(font: ImageFont.FreeTypeFont, char: str) -> list[str]:
    """The glyph of ``char`` as HEIGHT hex strings, bit WIDTH-1-k of a row set where pixel k is ink."""
    image = Image.new("L", (WIDTH, HEIGHT), 0)
    ImageDraw.Draw(image).text((0, -1), char, fill=255, font=font)
    pixels = image.load()
    rows = []
    for y in range(HEIGHT):
        bits = 0
        for x in range(WIDTH):
            bits = (bits << 1) | int(pixels[x, y] >= 128)
        rows.append(f"{bits:02x}")
    return rows


def main() -> None:
    path = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSansMono.ttf"
    font = ImageFont.truetype(str(path), SIZE)
    out = Path("gencoord_env/data/font.json")
    about = (f"DejaVu Sans Mono at {SIZE} pt in {WIDTH}x{HEIGHT} cells, one hex byte per pixel row (high bit: "
             "leftmost pixel); built by scripts/build_font.py. DejaVu fonts: Bitstream Vera licence, free to copy "
             "and modify.")
    glyphs = {c: "".join(glyph_rows(font, c)) for c in CHARS}
    out.write_text(json.dumps({"about": about, "width": WIDTH, "height": HEIGHT, "glyphs": glyphs}, indent=0) + "\n")
    print(f"{out}: {len(glyphs)} glyphs")


if __name__ == "__main__":
    main()
