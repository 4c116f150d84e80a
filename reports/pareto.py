"""A plan's Pareto plot, drawn directly: one scene of shapes (axes, ticks, each mode's frontier, the best circled)
written as SVG text and rasterised as PNG with Pillow.

Why not matplotlib: `perfledger plan --out` is a command people run per question; importing and laying out a
matplotlib figure cost more CPU than the search itself (~0.7 s of a ~2 s cold run). The plot is two polylines on
linear axes, so the scene is computed here (pure: `scene`) and each format only draws it. Byte-stable output (no
dates, fixed order), so it can be compared in tests.
"""

from __future__ import annotations

import html
import io
import math
from dataclasses import dataclass

WIDTH, HEIGHT = 840, 540
MARGIN = {"left": 78, "right": 24, "top": 44, "bottom": 58}
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")  # one per mode, in the answer's order
GRID, AXIS, INK = "#dddddd", "#333333", "#000000"


@dataclass(frozen=True)
class Shape:
    """One drawn element in pixel coordinates (y down): kind line | polyline | dot | ring | text."""

    kind: str
    points: tuple[tuple[float, float], ...]
    colour: str = INK
    width: float = 1.0
    text: str = ""
    size: int = 12
    anchor: str = "start"  # text: start | middle | end
    rotate: bool = False  # text: vertical, reading upwards


def nice_ticks(lo: float, hi: float, target: int = 6) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 × 10^k steps) covering [lo, hi]."""
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(target - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(lo / step) * step
    return [round(first + i * step, 10) for i in range(int(math.ceil((hi - first) / step)) + 1)]


def _label(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 or v == int(v) else f"{v:.3g}"


def scene(fronts: dict[str, list[dict]], best: dict | None, title: str) -> list[Shape]:
    """The plot as shapes: cluster tokens/s/GPU (y) against tokens/s/user (x) per mode, the best point ringed."""
    x_key, y_key = "tokens_per_s_per_user", "tokens_per_s_per_gpu_cluster"
    points = [(float(r[x_key]), float(r[y_key])) for rows in fronts.values() for r in rows]
    if best is not None:
        points.append((float(best[x_key]), float(best[y_key])))
    xs, ys = [p[0] for p in points] or [0.0, 1.0], [p[1] for p in points] or [0.0, 1.0]
    x_ticks, y_ticks = nice_ticks(min(0.0, min(xs)), max(xs)), nice_ticks(min(0.0, min(ys)), max(ys))
    left, right = MARGIN["left"], WIDTH - MARGIN["right"]
    top, bottom = MARGIN["top"], HEIGHT - MARGIN["bottom"]

    def at(x: float, y: float) -> tuple[float, float]:
        fx = (x - x_ticks[0]) / (x_ticks[-1] - x_ticks[0])
        fy = (y - y_ticks[0]) / (y_ticks[-1] - y_ticks[0])
        return round(left + fx * (right - left), 2), round(bottom - fy * (bottom - top), 2)

    out = [Shape("text", ((WIDTH / 2, 24),), text=title, size=13, anchor="middle")]
    for v in x_ticks:
        (px, _) = at(v, y_ticks[0])
        out += [Shape("line", ((px, top), (px, bottom)), GRID),
                Shape("text", ((px, bottom + 18),), text=_label(v), size=11, anchor="middle")]
    for v in y_ticks:
        (_, py) = at(x_ticks[0], v)
        out += [Shape("line", ((left, py), (right, py)), GRID),
                Shape("text", ((left - 6, py + 4),), text=_label(v), size=11, anchor="end")]
    out += [Shape("polyline", ((left, top), (left, bottom), (right, bottom)), AXIS, 1.2),
            Shape("text", (((left + right) / 2, HEIGHT - 16),), text="tokens/s/user", size=12, anchor="middle"),
            Shape("text", ((18, (top + bottom) / 2),), text="tokens/s/GPU (whole budget)", size=12, anchor="middle",
                  rotate=True)]
    legend = []
    for i, (mode, rows) in enumerate((m, r) for m, r in fronts.items() if r):
        colour = COLOURS[i % len(COLOURS)]
        line = tuple(at(float(r[x_key]), float(r[y_key])) for r in rows)
        out.append(Shape("polyline", line, colour, 1.6))
        out += [Shape("dot", (p,), colour, 3.5) for p in line]
        legend.append((mode, colour, "dot"))
    if best is not None:
        out.append(Shape("ring", (at(float(best[x_key]), float(best[y_key])),), INK, 9.0))
        legend.append((f"best ({best['mode']})", INK, "ring"))
    for i, (text, colour, mark) in enumerate(legend):
        y = top + 16 + 18 * i
        out += [Shape(mark, ((right - 150, y),), colour, 3.5 if mark == "dot" else 6.0),
                Shape("text", ((right - 138, y + 4),), colour if mark == "dot" else INK, text=text, size=11)]
    return out


def to_svg(shapes: list[Shape]) -> str:
    """The scene as a standalone SVG document."""
    out = ['<?xml version="1.0" encoding="utf-8"?>',
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
           'font-family="DejaVu Sans, Arial, sans-serif">', f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    for s in shapes:
        if s.kind in ("line", "polyline"):
            pts = " ".join(f"{x},{y}" for x, y in s.points)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{s.colour}" stroke-width="{s.width}"/>')
        elif s.kind in ("dot", "ring"):
            (x, y), fill = s.points[0], s.colour if s.kind == "dot" else "none"
            out.append(f'<circle cx="{x}" cy="{y}" r="{s.width}" fill="{fill}" stroke="{s.colour}" stroke-width="1.5"/>')
        else:
            (x, y) = s.points[0]
            turn = f' transform="rotate(-90 {x} {y})"' if s.rotate else ""
            out.append(f'<text x="{x}" y="{y}" font-size="{s.size}" text-anchor="{s.anchor}" fill="{s.colour}"{turn}>'
                       f"{html.escape(s.text, quote=False)}</text>")
    return "\n".join([*out, "</svg>"]) + "\n"


def _dejavu() -> str | None:
    """DejaVu Sans (the SVG's first face; it has × and ·) from matplotlib's bundled fonts, found without importing
    matplotlib; None: Pillow's default face."""
    from importlib.util import find_spec
    from pathlib import Path

    spec = find_spec("matplotlib")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        if path.is_file():
            return str(path)
    return None


def to_png(shapes: list[Shape]) -> bytes:
    """The scene rasterised (Pillow, imported here: only --out needs it)."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    fonts: dict[int, ImageFont.ImageFont] = {}
    face = _dejavu()
    for s in shapes:
        if s.kind in ("line", "polyline"):
            draw.line(list(s.points), fill=s.colour, width=max(1, round(s.width)))
        elif s.kind in ("dot", "ring"):
            (x, y), r = s.points[0], s.width
            draw.ellipse((x - r, y - r, x + r, y + r), fill=s.colour if s.kind == "dot" else None, outline=s.colour,
                         width=2 if s.kind == "ring" else 1)
        else:
            if s.size not in fonts:
                fonts[s.size] = ImageFont.truetype(face, s.size) if face else ImageFont.load_default(s.size)
            font = fonts[s.size]
            anchor = {"start": "ls", "middle": "ms", "end": "rs"}[s.anchor]
            if s.rotate:
                box = draw.textbbox((0, 0), s.text, font=font)
                label = Image.new("RGBA", (box[2] - box[0] + 4, box[3] - box[1] + 4), (255, 255, 255, 0))
                ImageDraw.Draw(label).text((2, 2 - box[1]), s.text, font=font, fill=s.colour)
                label = label.rotate(90, expand=True)
                (x, y) = s.points[0]
                image.paste(label, (round(x - label.width / 2), round(y - label.height / 2)), label)
            else:
                draw.text(s.points[0], s.text, font=font, fill=s.colour, anchor=anchor)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def pareto_plot(fronts: dict[str, list[dict]], best: dict | None, title: str) -> tuple[str, bytes]:
    """(SVG text, PNG bytes): each mode's frontier, cluster tokens/s/GPU against tokens/s/user, the best circled."""
    shapes = scene(fronts, best, title)
    return to_svg(shapes), to_png(shapes)
