"""Validation report: quarantined rows grouped by reason (check x column), each with file and line; repeated
measurements and their spread per slice (the `duplicates` table), noisy slices highlighted; and how much of
the collector's sweep grids each warehouse slice holds."""

from __future__ import annotations

import polars as pl

from perfledger.reports.page import Page, Section, Table

ROW_LIMIT = 500  # rows listed per page; the counts above always cover every row
NOISE_WARN, NOISE_HIGH = 0.05, 0.10  # p90 relative spread of a slice's repeats: highlighted above these
SLICE = ["table", "system", "backend", "version"]
DUPLICATE_COLUMNS = [*SLICE, "spread_rel"]


def reasons(quarantine: pl.DataFrame) -> pl.DataFrame:
    """Rows and files per (table, check, column), most frequent first."""
    if not quarantine.height:
        return pl.DataFrame(schema={"table": pl.String, "check": pl.String, "column": pl.String, "rows": pl.UInt32,
                                    "files": pl.UInt32})
    return (quarantine.group_by("table", "check", "column")
            .agg(rows=pl.len(), files=pl.col("source_file").n_unique())
            .sort(["rows", "table", "check", "column"], descending=[True, False, False, False]))


def spread_by_slice(duplicates: pl.DataFrame) -> pl.DataFrame:
    """Per (table, system, backend, version): repeated measurements and their relative spread against the kept
    (first) one -- median, p90, max, and how many repeats differ by more than NOISE_WARN; noisiest first."""
    if not duplicates.height:
        return pl.DataFrame(schema={**{c: pl.String for c in SLICE}, "repeats": pl.UInt32, "median_spread": pl.Float64,
                                    "p90_spread": pl.Float64, "max_spread": pl.Float64, "over_5pct": pl.UInt32})
    spread = pl.col("spread_rel")
    return (duplicates.group_by(SLICE)
            .agg(repeats=pl.len(), median_spread=spread.median(), p90_spread=spread.quantile(0.9, "nearest"),
                 max_spread=spread.max(), over_5pct=(spread > NOISE_WARN).sum().cast(pl.UInt32))
            .sort(["p90_spread", *SLICE], descending=[True, False, False, False, False], nulls_last=True))


def noise_class(p90: float | None) -> str:
    if p90 is None:
        return ""
    return "noise-high" if p90 > NOISE_HIGH else "noise-warn" if p90 > NOISE_WARN else "noise-ok"


def grid_cases(grid: dict, frame: pl.DataFrame) -> pl.DataFrame:
    """A grid's cases as a frame typed like the warehouse table's columns."""
    cases = pl.DataFrame(grid["cases"]).select(grid["columns"])
    return cases.with_columns(pl.col(c).cast(frame.schema[c]) for c in grid["columns"])


def held_cases(grid: dict, frame: pl.DataFrame) -> pl.DataFrame:
    """The distinct (system, backend, version, *grid columns) rows of a table that are cases of the grid
    (cheap: each column is first narrowed to the grid's values, then joined)."""
    cases = grid_cases(grid, frame)
    narrowed = frame.filter(pl.all_horizontal(pl.col(c).is_in(cases[c].unique().implode()) for c in grid["columns"]))
    return narrowed.join(cases, on=grid["columns"], how="semi").unique()


def grid_coverage(grids: list[dict], held: dict[str, pl.DataFrame], slices: dict[str, list[tuple]]) -> list[dict]:
    """Per collector op and warehouse slice of its table: how many of the op's sweep-grid cases the slice holds.
    grids: {op, table, columns, cases}; held: op -> held_cases; slices: table -> its (system, backend, version)."""
    out = []
    for grid in grids:
        frame = held.get(grid["op"])
        if frame is None:
            continue
        size = len({tuple(case[c] for c in grid["columns"]) for case in grid["cases"]})
        counts = {tuple(k): n for *k, n in frame.group_by("system", "backend", "version").len().iter_rows()}
        for system, backend, version in slices.get(grid["table"], []):
            have = counts.get((system, backend, version), 0)
            out.append({"op": grid["op"], "table": grid["table"], "system": system, "backend": backend, "version": version,
                        "grid_cases": size, "held": have, "share": have / size if size else 0.0})
    return sorted(out, key=lambda r: (r["op"], -r["share"], r["system"], r["backend"], r["version"]))


def validation_page(quarantine: pl.DataFrame, failed_batches: list[dict], duplicates: pl.DataFrame | None = None,
                    coverage: list[dict] | None = None) -> Page:
    """The page: reason counts, failed batches, repeated measurements, grid coverage, then the quarantined rows."""
    by_reason = reasons(quarantine)
    listed = quarantine.sort("table", "source_file", "source_row").head(ROW_LIMIT) if quarantine.height else quarantine
    rows_section = Section("Quarantined rows", table=Table(
        ["table", "system", "backend", "version", "file", "line", "check", "column", "value"],
        [[r["table"], r["system"], r["backend"], r["version"], r["source_file"], r["source_row"], r["check"],
          r["column"], r["value"]] for r in listed.iter_rows(named=True)],
        filterable=True,
        note=f"first {ROW_LIMIT} of {quarantine.height} findings" if quarantine.height > ROW_LIMIT else ""))
    failures = Section("Failed batches (nothing written for them)",
                       text=[] if failed_batches else ["none"],
                       table=Table(["source", "error"], [[f["source"], f["error"]] for f in failed_batches])
                       if failed_batches else None)
    sections = [Section("Quarantined rows by reason", text=[] if by_reason.height else ["none"],
                        table=Table(list(by_reason.columns), [list(r) for r in by_reason.iter_rows()])
                        if by_reason.height else None), failures]
    repeats = 0
    if duplicates is not None:
        spread = spread_by_slice(duplicates)
        repeats = duplicates.height
        noisy = spread.filter(pl.col("p90_spread") > NOISE_HIGH).height
        sections.append(Section(
            "Repeated measurements",
            text=[f"{repeats:,} measurements repeat a key already held (same slice, op, kernel and shape): the first is "
                  "curated, the repeats are kept in `duplicates` with their relative spread |repeat − kept| / kept. "
                  f"{noisy} of {spread.height} slices have a p90 spread above {NOISE_HIGH:.0%} (noisy)."],
            legend=[("noise-high", f"p90 spread > {NOISE_HIGH:.0%}"), ("noise-warn", f"> {NOISE_WARN:.0%}"),
                    ("noise-ok", f"≤ {NOISE_WARN:.0%}")],
            table=Table(["table", "system", "backend", "version", "repeats", "median spread", "p90 spread", "max spread",
                         f"repeats > {NOISE_WARN:.0%}"],
                        [[*r[:4], r[4], _pct(r[5]), _pct(r[6]), _pct(r[7]), r[8]] for r in spread.iter_rows()],
                        row_classes=[noise_class(p) for p in spread["p90_spread"]], filterable=True)))
    if coverage is not None:
        ops = list(dict.fromkeys(r["op"] for r in coverage))
        summary_rows = []
        for op in ops:
            mine = [r for r in coverage if r["op"] == op]
            shares = sorted(r["share"] for r in mine)
            summary_rows.append([op, mine[0]["table"], mine[0]["grid_cases"], len(mine),
                                 sum(1 for r in mine if r["held"] == r["grid_cases"]), _pct(shares[len(shares) // 2])])
        sections.append(Section(
            "Coverage of the collector's sweep grids: per op",
            text=["Slices of each collector op's table, how many hold every case of its grid, and the median share held."],
            table=Table(["op", "table", "grid cases", "slices", "slices with the whole grid", "median share"],
                        summary_rows) if summary_rows else None))
        sections.append(Section(
            "Coverage of the collector's sweep grids",
            text=["Per collector op (collector/registry.yaml) and warehouse slice of its table: how many cases of the "
                  "op's case grid (collector/cases/*.yaml, every dtype) the slice holds."
                  + ("" if coverage else " No slice of a collector op's table is in the warehouse.")],
            table=Table(["op", "table", "system", "backend", "version", "grid cases", "held", "share"],
                        [[r["op"], r["table"], r["system"], r["backend"], r["version"], r["grid_cases"], r["held"],
                          _pct(r["share"])] for r in coverage], filterable=True)))
    sections.append(rows_section)
    summary = (f"{quarantine.height} findings in {quarantine['source_file'].n_unique() if quarantine.height else 0} files, "
               f"{by_reason.height} distinct reasons; {len(failed_batches)} failed batches in the last run"
               + (f"; {repeats:,} repeated measurements" if duplicates is not None else ""))
    return Page("validation", "Validation report", sections, summary=summary)


def _pct(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f}%"
