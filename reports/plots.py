"""Plots as SVG text: coverage heatmap (lane x system), estimated latency vs tokens per system, a plan's Pareto fronts
(also as PNG).

Matplotlib's object API (no global pyplot state); a fixed hash salt and no date make the SVG
byte-stable, so rendered pages can be golden files.
"""

from __future__ import annotations

import io

import numpy as np


def _svg(fig) -> str:
    import matplotlib

    matplotlib.rcParams["svg.hashsalt"] = "perfledger"
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    return buf.getvalue()


def coverage_heatmap(cells: list[dict], title: str) -> str:
    """Rows per lane x system (summed over backends/versions); empty cells stay blank."""
    from matplotlib.figure import Figure

    lanes = sorted({c["lane"] for c in cells})
    systems = sorted({c["system"] for c in cells})
    grid = np.zeros((len(lanes), len(systems)))
    for c in cells:
        grid[lanes.index(c["lane"]), systems.index(c["system"])] += c["rows"] or 0
    fig = Figure(figsize=(1.2 + 0.9 * max(len(systems), 1), 1.0 + 0.5 * max(len(lanes), 1)))
    ax = fig.add_subplot()
    ax.imshow(np.log1p(grid), cmap="Greens", aspect="auto")
    ax.set_xticks(range(len(systems)), systems, rotation=45, ha="right")
    ax.set_yticks(range(len(lanes)), lanes)
    for (i, j), value in np.ndenumerate(grid):
        ax.text(j, i, f"{int(value)}" if value else "", ha="center", va="center", fontsize=8)
    ax.set_title(title)
    return _svg(fig)


def latency_plot(points: list[dict], title: str) -> str:
    """One line per system/backend/version: estimated ms against tokens (log-log)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    series: dict[str, list[tuple[int, float]]] = {}
    for p in points:
        series.setdefault(f"{p['system']} {p['backend']} {p['version']}", []).append((p["tokens"], p["ms"]))
    for label, xy in sorted(series.items()):
        xs, ys = zip(*sorted(xy), strict=True)
        ax.plot(xs, ys, marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tokens")
    ax.set_ylabel("estimated ms")
    ax.set_title(title)
    if series:
        ax.legend(fontsize=7)
    return _svg(fig)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=120, metadata={"Software": None})
    return buf.getvalue()


def pareto_plot(fronts: dict[str, list[dict]], best: dict | None, title: str) -> tuple[str, bytes]:
    """(SVG text, PNG bytes): each mode's frontier, cluster tokens/s/GPU against tokens/s/user, the best circled."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    for mode, rows in fronts.items():
        if rows:
            ax.plot([r["tokens_per_s_per_user"] for r in rows], [r["tokens_per_s_per_gpu_cluster"] for r in rows],
                    marker="o", markersize=4, label=mode)
    if best is not None:
        ax.scatter([best["tokens_per_s_per_user"]], [best["tokens_per_s_per_gpu_cluster"]], s=160, facecolors="none",
                   edgecolors="black", linewidths=1.5, label=f"best ({best['mode']})", zorder=3)
    ax.set_xlabel("tokens/s/user")
    ax.set_ylabel("tokens/s/GPU (whole budget)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if fronts or best is not None:
        ax.legend(fontsize=8)
    return _svg(fig), _png(fig)
