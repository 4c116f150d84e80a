"""A test per page of the published site in headless Chromium at 1400 px: the shared nav bar and stylesheet,
no horizontal overflow, no clipped cell, the page's legends and its numbers (what issue #16 asked to trust)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from perfledger.reports.page import fmt
from tests.reports.test_browser import ARGS, CHROMIUM

WIDTH = 1400
NAV_BACKGROUND = "rgb(29, 53, 87)"  # site.css nav: every page that links the stylesheet shows it


@pytest.fixture(scope="module")
def page(published_site: dict):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} missing: apt-get install -y chromium (make test installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        tab = browser.new_page(viewport={"width": WIDTH, "height": 900})
        yield tab
        browser.close()


def open_page(page, site: dict, name: str):
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto((site["out"] / f"{name}.html").as_uri())
    assert errors == []
    return page


def pages(site: dict) -> list[str]:
    return sorted(p.stem for p in Path(site["out"]).glob("*.html"))


def check_layout(page, name: str, every: list[str]) -> None:
    """Shared nav (a link to every page, this one marked), the stylesheet applied, nothing wider than the
    window, and no table cell whose text is clipped."""
    links = page.eval_on_selector_all("nav a", "els => els.map(e => e.getAttribute('href'))")
    assert sorted(links) == sorted(f"{p}.html" for p in every), name
    assert page.eval_on_selector("nav a.current", "e => e.getAttribute('href')") == f"{name}.html"
    assert page.eval_on_selector("nav", "e => getComputedStyle(e).backgroundColor") == NAV_BACKGROUND, name
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH, f"{name}: wider than {WIDTH} px"
    clipped = page.evaluate("""[...document.querySelectorAll('td, th')].filter(c => c.scrollWidth > c.clientWidth + 1
                               && getComputedStyle(c).overflow === 'hidden').length""")
    assert clipped == 0
    assert page.evaluate("[...document.querySelectorAll('*')].filter(e => getComputedStyle(e).wordBreak === "
                         "'break-all').length") == 0, f"{name}: text would break mid-word"
    # A long cell wraps between words only: every word sits in a nowrap span (no break after a `-` of `--flag`).
    loose = page.evaluate("""[...document.querySelectorAll('td.long')].filter(td => [...td.querySelectorAll('span.w')]
                             .some(w => getComputedStyle(w).whiteSpace !== 'nowrap')
                             || td.textContent.split(' ').length !== td.querySelectorAll('span.w').length).length""")
    assert loose == 0, f"{name}: a long cell can break inside a word"


def table_rows(page, section: str) -> list[dict]:
    """The rows of the first table under the h2 whose text starts with `section`, as dicts by header."""
    return page.evaluate("""title => {
        const h2 = [...document.querySelectorAll('h2')].find(h => h.textContent.startsWith(title));
        const table = h2.parentElement.querySelector('table');
        const heads = [...table.querySelectorAll('thead th')].map(th => th.textContent);
        return [...table.querySelectorAll('tbody tr')].map(tr => Object.fromEntries(
            [...tr.children].map((td, i) => [heads[i], td.textContent]).concat([['_class', tr.className]])));
    }""", section)


def legend(page, section: str) -> list[str]:
    return page.evaluate("""title => {
        const h2 = [...document.querySelectorAll('h2')].find(h => h.textContent.startsWith(title));
        return [...h2.parentElement.querySelectorAll('.legend span')].map(s => s.textContent);
    }""", section)


def test_every_page_shares_nav_and_stylesheet_and_fits_1400px(page, published_site: dict) -> None:
    every = pages(published_site)
    assert {"index", "matrix", "validation", "diff", "estimates", "ledger-kimi-k3", "plan-qwen--qwen3-32b",
            "plan-moonshotai--kimi-k3"} <= set(every)
    for name in every:
        check_layout(open_page(page, published_site, name), name, every)


def test_index_shows_the_heatmap_and_history(page, published_site: dict) -> None:
    open_page(page, published_site, "index")
    heatmap = (published_site["out"] / "plots" / "coverage-kimi-k3.svg").read_text()
    # One row per lane x backend x version: sglang and vllm KDA are never summed together.
    assert "kda · sglang 0.5.16" in heatmap and "kda · vllm 0.1.dev19262" in heatmap
    assert "rows in the cell (log scale)" in heatmap  # the colour bar
    # Matplotlib writes each text as glyph paths after a `<!-- text -->` comment: every missing cell is labelled.
    missing = [c for c in published_site["ledgers"][0]["cells"] if c["status"] == "missing"]
    assert missing and heatmap.count("<!-- missing -->") == len(missing)
    assert "missing (expected, no rows)" in heatmap  # the status legend names them
    history = [h for h in page.eval_on_selector_all("h2", "els => els.map(e => e.textContent)") if h.startswith("History")]
    assert {"History: warehouse contents", "History: rows per lane", "History: scenario estimates"} <= set(history)
    lanes = table_rows(page, "History: rows per lane")
    done = sum(c["rows"] for c in published_site["ledgers"][0]["cells"] if c["lane"] == "kda")
    assert lanes and lanes[0]["kda"] == fmt(done)


def test_index_shows_the_generator_warnings_of_a_deployment_priced_on_the_warehouse(page, published_site: dict) -> None:
    import yaml

    open_page(page, published_site, "index")
    rows = table_rows(page, "Generator warnings")
    # vllm_agg.yaml sets max_batch_size 256; a production rule makes it 512: the warning names both values.
    assert any(r["deployment"] == "vllm_agg" and r["warning"].startswith("Workers.agg.max_batch_size: the input sets 256")
               and "makes it 512" in r["warning"] for r in rows)
    # The YAML names no version: the warehouse holds vllm 0.24.0 (not the default release's 0.20.1), so it is used.
    resolved = yaml.safe_load((published_site["out"] / "deployments" / "vllm_agg" / "generator_config.yaml").read_text())
    assert (resolved["version"], resolved["generator_dynamo_version"]) == ("0.24.0", "1.3.0")


def test_ledger_page_says_where_every_date_came_from(page, published_site: dict) -> None:
    open_page(page, published_site, "ledger-kimi-k3")
    rows = table_rows(page, "Data inventory")
    assert rows and all(r["date source"] in ("collected", "ingested") for r in rows if r["date"])
    assert all(r["date source"] == "" for r in rows if not r["date"])
    collected = {c["meta_collected_at"][:10] for c in published_site["ledgers"][0]["cells"] if c.get("meta_collected_at")}
    assert all(r["date source"] == "collected" for r in rows if r["date"] in collected)


def test_matrix_page_puts_ours_beside_the_imported_with_blocking_first(page, published_site: dict) -> None:
    open_page(page, published_site, "matrix")
    counts = table_rows(page, "Snapshot head beside ours")
    built = published_site["built_matrix"]["by_status"]
    assert all(r["ours"] == fmt(built.get(r["Status"], 0)) for r in counts)
    changes = table_rows(page, "Compare: head → ours")
    blocking = [r["_class"] == "blocking" for r in changes]
    assert blocking == sorted(blocking, reverse=True), "blocking changes come first"
    assert legend(page, "Compare") == ["blocking change"]
    header = page.evaluate("""[...document.querySelectorAll('h2')].find(h => h.textContent === 'System × backend')
                              .parentElement.querySelector('thead').textContent""")
    assert "(head)" in header and "(ours)" in header
    sources = page.eval_on_selector_all(".tab tbody tr td:nth-child(6)", "els => els.map(e => e.textContent)")
    assert sources and all(sources), "every row's Source is filled"
    assert "FAIL" in legend(page, "Snapshot head")


def test_validation_page_shows_repeats_and_their_spread(page, published_site: dict) -> None:
    from perfledger.reports.validation import NOISE_HIGH
    from perfledger.warehouse.store import Warehouse

    open_page(page, published_site, "validation")
    duplicates = Warehouse(published_site["root"]).read_table("duplicates")
    assert f"{duplicates.height:,} measurements repeat a key" in page.inner_text("body")
    rows = table_rows(page, "Repeated measurements")
    assert sum(int(r["repeats"].replace(",", "")) for r in rows) == duplicates.height
    p90 = duplicates.group_by("table", "system", "backend", "version").agg(pl.col("spread_rel").quantile(0.9, "nearest"))
    noisy = p90.filter(pl.col("spread_rel") > NOISE_HIGH).height
    assert sum(r["_class"] == "noise-high" for r in rows) == noisy
    assert len(legend(page, "Repeated measurements")) == 3
    per_op = table_rows(page, "Coverage of the collector's sweep grids: per op")
    assert per_op and all(int(r["slices"]) >= int(r["slices with the whole grid"]) for r in per_op)


def test_estimates_page_names_parallelism_and_never_hides_a_misfit(page, published_site: dict) -> None:
    open_page(page, published_site, "estimates")
    rows = published_site["estimates"]["gate"]["rows"]
    headline = table_rows(page, "moonshotai/Kimi-K3: headline estimates")
    too_big = table_rows(page, "moonshotai/Kimi-K3: deployments that do not fit")
    assert headline and too_big and len(headline) + len(too_big) == len(rows)
    assert all(r["fit"] in ("fits", "unknown") and r["parallelism"] for r in headline)
    assert all(r["fit"] == "does not fit" and r["_class"] == "fit-no" for r in too_big)
    assert {r["GPUs"] for r in headline} >= {"16"}  # the headline K3 deployment is two 8-GPU nodes
    for r in too_big:
        assert float(r["GiB per GPU"].replace(",", "")) >= float(r["GPU GiB"].replace(",", ""))
    assert legend(page, "moonshotai/Kimi-K3: headline") == [
        "fits in GPU memory", "memory not sized (no memory model)", "does not fit: not a deployable number"]
    glance = table_rows(page, "moonshotai/Kimi-K3: at a glance")
    marked = sum(v.endswith(" ✗") for r in glance for v in r.values())
    assert marked == sum(1 for r in rows if r["fit"] == "does not fit" and r["ms"] is not None)
    plot = next((published_site["out"] / "plots").glob("latency-*.svg")).read_text()
    systems = {p["system"] for p in published_site["estimates"]["sweeps"]["kimi-k3"]["points"]}
    assert plot.count('<g id="legend_') == len(systems)  # one short legend per system panel, none over all lines


def test_latency_plot_is_small_multiples_with_one_colour_per_backend() -> None:
    from perfledger.reports.plots import latency_plot

    points = [{"system": s, "backend": b, "version": "1", "tokens": t, "ms": t / 100,
               "fit": "does not fit" if s == "l40s" else "fits"}
              for s in ("b200_sxm", "h200_sxm", "l40s") for b in ("sglang", "vllm") for t in (256, 1024)]
    svg = latency_plot(points, "t")
    assert svg.count('<g id="legend_') == 3 and svg.count("<!-- sglang 1 -->") == 2  # a panel and legend per system
    assert svg.count('<g id="axes_') == 3
    # the l40s deployment does not fit: its panel and both its lines say so
    assert "<!-- l40s: does not fit -->" in svg and svg.count("<!-- vllm 1 (does not fit) -->") == 1


def _section_text(page, title: str) -> str:
    return page.evaluate("""title => [...document.querySelectorAll('h2')].find(h => h.textContent.startsWith(title))
                            .parentElement.innerText""", title)


def test_plan_page_shows_the_best_its_fronts_top_configs_and_the_rendered_deployment(page, published_site: dict) -> None:
    import yaml

    from perfledger.estimator.plan.search import layout_label
    from perfledger.estimator.plans import CLUSTER

    every = pages(published_site)
    check_layout(open_page(page, published_site, "plan-qwen--qwen3-32b"), "plan-qwen--qwen3-32b", every)
    qwen = published_site["plans"]["questions"][0]
    payload, best = qwen["payload"], qwen["payload"]["best"]
    assert best is not None and qwen["verdict"] == "new"  # the first plan of the question: no baseline to gate against
    title = f"8 × h200_sxm (vllm): {best['mode']} {layout_label(best['mode'], best)} × {best['replicas']}"
    rows = table_rows(page, title)
    assert rows[0]["mode"] == f"{best['mode']} (best)" and rows[0]["verdict"] == "new" and rows[0]["_class"] == "verdict-new"
    assert (rows[0]["tokens/s/GPU"], rows[0]["TPOT ms"]) == (fmt(best[CLUSTER]), fmt(best["tpot_ms"]))
    others = [m for m in ("agg", "disagg") if m != best["mode"] and payload[m]]
    assert [r["mode"] for r in rows[1:]] == others  # each other mode's own best beside the winner
    assert f"What changed: first plan of {qwen['label']}: {best['mode']}" in _section_text(page, title)
    tops = table_rows(page, "8 × h200_sxm (vllm): top configs")
    expected = [(m, fmt(r[CLUSTER]), layout_label(m, r)) for m in ("agg", "disagg") for r in payload[m]]
    assert [(r["mode"], r["tokens/s/GPU"], r["layout"]) for r in tops] == expected
    assert all(r["tpot_ms"] <= 30 for m in ("agg", "disagg") for r in payload[m])
    plot = (published_site["out"] / "plots" / f"pareto-{qwen['id']}.svg").read_text()
    assert all(f">{m}</text>" in plot for m in ("agg", "disagg") if payload[f"{m}_pareto"])  # the legend's entries
    assert f">best ({best['mode']})</text>" in plot
    assert page.evaluate("[...document.querySelectorAll('img')].every(i => i.complete && i.naturalWidth > 0)")
    config = yaml.safe_load((published_site["out"] / qwen["folder"] / "generator_config.yaml").read_text())
    workers = config["WorkerConfig"]
    if best["mode"] == "agg":
        assert workers["agg_workers"] == best["replicas"]
        assert config["Workers"]["agg"]["tensor_parallel_size"] == best["tp"]
    else:
        assert workers["decode_workers"] == best["decode"]["workers"] * best["replicas"]
    assert (published_site["out"] / qwen["folder"] / "run_0.sh").is_file()
    open_page(page, published_site, "index")
    links = page.eval_on_selector_all("a", "els => els.map(e => e.getAttribute('href'))")
    assert f"{qwen['folder']}/run_0.sh" in links


def test_plan_page_names_each_refusal_and_the_estimate_page_shows_the_search_beside_the_scenario(page, published_site: dict
                                                                                               ) -> None:
    every = pages(published_site)
    check_layout(open_page(page, published_site, "plan-moonshotai--kimi-k3"), "plan-moonshotai--kimi-k3", every)
    k3 = published_site["plans"]["questions"][1]
    assert k3["payload"]["best"] is None and k3["verdict"] == "refused"
    assert not (published_site["out"] / k3["folder"] / "run_0.sh").exists()
    reasons = table_rows(page, "16 × h200_sxm (vllm): refusals")
    assert {r["mode"]: r["reason"] for r in reasons} == k3["payload"]["reasons"]
    assert set(k3["payload"]["reasons"]) == {"agg", "disagg"}
    best = table_rows(page, "16 × h200_sxm (vllm): no deployment meets the question")
    assert [(r["mode"], r["verdict"], r["_class"]) for r in best] == [("none", "refused", "verdict-refused")]
    open_page(page, published_site, "estimates")
    rows = table_rows(page, "moonshotai/Kimi-K3: headline") + table_rows(page, "moonshotai/Kimi-K3: deployments that")
    beside = {(r["system"], r["backend"]): r["search's best (plans)"] for r in rows}
    assert beside[("h200_sxm", "vllm")] == "none on 16 GPUs"  # the stored plan covers K3 on h200 vLLM: it refuses
    assert all(v == "" for (system, _), v in beside.items() if system != "h200_sxm")
