"""The plan's Pareto plot drawn without matplotlib: the SVG parses and holds every frontier point, the PNG decodes at
the scene's size, ticks cover the data, and no matplotlib is imported to draw it."""

from __future__ import annotations

import io
import math
import subprocess
import sys
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from perfledger.reports.pareto import HEIGHT, WIDTH, nice_ticks, pareto_plot

FRONTS = {"agg": [{"tokens_per_s_per_user": 10.0 * i, "tokens_per_s_per_gpu_cluster": 800.0 - 60 * i} for i in range(1, 9)],
          "disagg": [{"tokens_per_s_per_user": 80.0 + 5 * i, "tokens_per_s_per_gpu_cluster": 500.0 - 70 * i} for i in range(5)]}
BEST = {"mode": "agg", **FRONTS["agg"][2]}


def test_svg_and_png_hold_the_fronts_and_the_best():
    from PIL import Image

    svg, png = pareto_plot(FRONTS, BEST, "Qwen/Qwen3-32B on 8 × h200_sxm <vllm>")
    root = ET.fromstring(svg.split("\n", 1)[1])
    ns = "{http://www.w3.org/2000/svg}"
    circles = root.findall(f"{ns}circle")
    dots = [c for c in circles if c.get("fill") != "none"]
    assert len(dots) >= sum(len(r) for r in FRONTS.values())  # every front point (+ legend marks)
    assert any(c.get("fill") == "none" for c in circles)  # the best, ringed
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert "Qwen/Qwen3-32B on 8 × h200_sxm <vllm>" in texts and "best (agg)" in texts
    assert Image.open(io.BytesIO(png)).size == (WIDTH, HEIGHT)
    assert pareto_plot(FRONTS, BEST, "t") == pareto_plot(FRONTS, BEST, "t")  # byte-stable


def test_drawing_imports_no_matplotlib():
    code = ("import sys; from perfledger.reports.pareto import pareto_plot; "
            "pareto_plot({'agg': [{'tokens_per_s_per_user': 1.0, 'tokens_per_s_per_gpu_cluster': 2.0}]}, None, 't'); "
            "print('matplotlib' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


@given(st.floats(0, 1e5), st.floats(0.01, 1e6))
def test_ticks_cover_the_range_in_round_steps(lo, span):
    ticks = nice_ticks(lo, lo + span)
    assert ticks[0] <= lo and ticks[-1] >= lo + span - 1e-9 * (lo + span)
    steps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    assert len(ticks) >= 2 and max(steps) - min(steps) <= 1e-6 * max(steps)
    mantissa = steps[0] / 10 ** math.floor(math.log10(steps[0]))
    assert any(abs(mantissa - m) < 1e-6 for m in (1, 2, 2.5, 5, 10))
