"""Plots as SVG text: the coverage heatmap (lane x system, one row per backend/version), estimated latency vs
tokens as small multiples (one panel per system); a plan's Pareto plot is reports/pareto.py (drawn without matplotlib).

Matplotlib's object API (no global pyplot state); a fixed hash salt and no date make the SVG byte-stable, so
rendered pages can be golden files.
"""

from __future__ import annotations

import io
import logging
import math

import numpy as np

# Log-scale tick labels are mathtext, which asks for the Computer Modern / STIX families a minimal machine lacks and
# falls back to DejaVu Sans, the font every plot here uses anyway; the fallback is right, its WARNING per family is noise.
logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)

# Ledger cell statuses drawn on the heatmap: (edge colour, label). Done cells carry no mark.
STATUS_MARKS = {"partial": ("#e67700", "partial"), "failed": ("#c92a2a", "failed"),
                "missing": ("#c92a2a", "missing (expected, no rows)"),
                "unexpected": ("#5f3dc4", "unexpected (not in the lane spec)")}
CMAP = "YlGnBu"


def _svg(fig) -> str:
    import matplotlib

    matplotlib.rcParams["svg.hashsalt"] = "perfledger"
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    return buf.getvalue()


def coverage_rows(cells: list[dict]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """Heatmap rows (lane, backend, version) and columns (systems): no two backends or versions share a row."""
    rows = sorted({(c["lane"], c["backend"], c["version"]) for c in cells})
    return rows, sorted({c["system"] for c in cells})


def _text_colour(rgba) -> str:
    """Black on light cells, white on dark ones (relative luminance)."""
    r, g, b = rgba[:3]
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 else "white"


def coverage_heatmap(cells: list[dict], title: str) -> str:
    """Rows per (lane, backend, version) x system, log colour scale with a colour bar; a missing expected cell
    is outlined and labelled, a cell the lane spec does not expect is outlined too; no cell is blank-but-expected."""
    from matplotlib import colormaps
    from matplotlib.colors import LogNorm
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch, Rectangle

    rows, systems = coverage_rows(cells)
    grid = np.full((len(rows), len(systems)), np.nan)
    status: dict[tuple[int, int], str] = {}
    for c in cells:
        i, j = rows.index((c["lane"], c["backend"], c["version"])), systems.index(c["system"])
        grid[i, j] = (0 if np.isnan(grid[i, j]) else grid[i, j]) + (c["rows"] or 0)
        status[(i, j)] = c["status"]
    top = max(float(np.nanmax(grid)) if np.isfinite(grid).any() else 1.0, 10.0)
    fig = Figure(figsize=(2.5 + 1.05 * max(len(systems), 1), 1.6 + 0.42 * max(len(rows), 1)))
    ax = fig.add_subplot()
    norm = LogNorm(vmin=1, vmax=top)
    shown = np.ma.masked_where(~(grid > 0), grid)
    cmap = colormaps[CMAP].with_extremes(bad="#f8f9fa")
    image = ax.imshow(shown, cmap=cmap, norm=norm, aspect="auto")
    ax.set_xticks(range(len(systems)), systems, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), [f"{lane} · {backend} {version}" for lane, backend, version in rows])
    ax.set_xticks(np.arange(-0.5, len(systems)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(rows)), minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)
    for (i, j), value in np.ndenumerate(grid):
        state = status.get((i, j))
        if state is None:
            ax.text(j, i, "–", ha="center", va="center", fontsize=8, color="#adb5bd")
            continue
        colour = _text_colour(cmap(norm(value))) if value > 0 else "black"
        label = f"{int(value):,}" if value > 0 else "0"
        ax.text(j, i, label if state != "missing" else "missing", ha="center", va="center", fontsize=8,
                color="#c92a2a" if state == "missing" else colour, fontweight="bold" if state == "missing" else "normal")
        if state in STATUS_MARKS:
            ax.add_patch(Rectangle((j - 0.46, i - 0.44), 0.92, 0.88, fill=False, linewidth=2,
                                   edgecolor=STATUS_MARKS[state][0], linestyle="--" if state == "unexpected" else "-"))
    bar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    bar.set_label("rows in the cell (log scale)")
    present = [s for s in STATUS_MARKS if s in status.values()]
    handles = [Patch(facecolor=cmap(norm(top ** 0.5)), label="done: rows as colour")]
    handles += [Patch(facecolor="white", edgecolor=STATUS_MARKS[s][0], linewidth=2, linestyle="--" if s == "unexpected" else "-",
                      label=STATUS_MARKS[s][1]) for s in present]
    handles.append(Patch(facecolor="#f8f9fa", edgecolor="#dee2e6", label="– not part of the lane on this system"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=min(len(handles), 3), fontsize=8,
              frameon=False)
    ax.set_title(title)
    return _svg(fig)


def latency_plot(points: list[dict], title: str) -> str:
    """Small multiples: one log-log panel per system, one line per backend/version (a short legend per panel); a
    deployment that does not fit in GPU memory is dashed and says so in its legend (and panel title)."""
    from matplotlib.figure import Figure

    panels: dict[str, dict[str, list[tuple[int, float]]]] = {}
    unfit: set[tuple[str, str]] = set()  # (system, series) whose deployment does not fit in GPU memory
    for p in points:
        label = f"{p['backend']} {p['version']}"
        panels.setdefault(p["system"], {}).setdefault(label, []).append((p["tokens"], p["ms"]))
        if p.get("fit") == "does not fit":
            unfit.add((p["system"], label))
    names = sorted(panels) or ["no data"]
    labels = sorted({label for series in panels.values() for label in series})
    colours = {label: f"C{i % 10}" for i, label in enumerate(labels)}  # one colour per backend/version on every panel
    cols = min(4, len(names))
    nrows = math.ceil(len(names) / cols)
    fig = Figure(figsize=(3.4 * cols, 2.7 * nrows + 0.6))
    axes = fig.subplots(nrows, cols, sharex=True, sharey=True, squeeze=False)
    for ax, system in zip(axes.flat, names, strict=False):
        series = panels.get(system, {})
        for label, xy in sorted(series.items()):
            xs, ys = zip(*sorted(xy), strict=True)
            misfit = (system, label) in unfit
            ax.plot(xs, ys, marker="o", markersize=3, color=colours[label], linestyle="--" if misfit else "-",
                    label=f"{label} (does not fit)" if misfit else label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        none_fit = bool(series) and all((system, label) in unfit for label in series)
        ax.set_title(f"{system}: does not fit" if none_fit else system, fontsize=9,
                     color="#c92a2a" if none_fit else "black")
        ax.grid(True, which="major", linewidth=0.4, alpha=0.6)
        if panels.get(system):
            ax.legend(fontsize=6.5, loc="upper left", frameon=False)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("tokens")
    for ax in axes[:, 0]:
        ax.set_ylabel("estimated ms")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _svg(fig)
