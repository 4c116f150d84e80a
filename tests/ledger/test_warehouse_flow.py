"""End to end on a real warehouse: ingest K3 folders from ../shared with the ledger hook, prune, build,
as-of, decide, matrix import/count/compare, report."""

import json

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from perfledger.cli import app
from perfledger.ledger.hooks import on_ingest
from perfledger.ledger.record import stored_events
from perfledger.warehouse.ingest import ingest
from perfledger.warehouse.store import Warehouse
from tests.ledger.curated import MATRIX_STATES, SHARED_DATA, wheel_systems

pytestmark = pytest.mark.xdist_group("ledger-test_warehouse_flow")

FOLDERS = ["b200_sxm/kda/sglang/0.5.16", "l40s/kda/sglang/0.5.16", "b200_sxm/moe/sglang/0.5.16"]
runner = CliRunner()


def cli(*args: str) -> tuple[int, dict | str]:
    result = runner.invoke(app, list(args))
    out = result.stdout.strip().splitlines()
    try:
        return result.exit_code, json.loads(out[-1]) if out else {}
    except json.JSONDecodeError:
        return result.exit_code, result.stdout


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    """Ingest three K3 folders, then a pruned copy of l40s kda (22 generation rows fewer)."""
    root = tmp_path_factory.mktemp("wh")
    wh = Warehouse(root)
    first = ingest([str(SHARED_DATA / f) for f in FOLDERS], wh, on_commit=on_ingest)
    assert not first.failed_batches
    batches_v1 = wh.table_version("batches")
    tree = tmp_path_factory.mktemp("tree") / "data" / "l40s" / "kda" / "sglang" / "0.5.16"
    tree.mkdir(parents=True)
    rows = pl.read_parquet(SHARED_DATA / "l40s/kda/sglang/0.5.16/kda_perf.parquet")
    drop = rows.filter(pl.col("phase") == "generation").head(22)
    kept = rows.join(drop, on=rows.columns, how="anti")
    kept.write_parquet(tree / "kda_perf.parquet")
    meta = yaml.safe_load((SHARED_DATA / "l40s/kda/sglang/0.5.16/collection_meta.yaml").read_text())
    meta["tables"]["kda_perf"]["rows"] = kept.height
    (tree / "collection_meta.yaml").write_text(yaml.safe_dump(meta))
    second = ingest([str(tree)], wh, on_commit=on_ingest)
    assert not second.failed_batches
    return {"root": str(root), "wh": wh, "first": first, "second": second, "batches_v1": batches_v1}


def test_hook_appends_collect_then_prune(flow):
    events = stored_events(flow["wh"], "moonshotai/Kimi-K3")
    got = events.select("kind", "lane", "system", "rows_before", "rows_after").rows()
    assert ("collect", "kda", "b200_sxm", 0, 976) in got
    assert ("collect", "kda", "l40s", 0, 1074) in got
    assert ("collect", "megamoe.module", "b200_sxm", 0, 64) in got
    prune = events.filter(pl.col("kind") == "prune").row(0, named=True)
    assert (prune["system"], prune["rows_before"], prune["rows_after"]) == ("l40s", 1074, 1052)
    assert prune["batch_ids"] == flow["second"].batch_ids


def test_build_json_and_no_duplicate_events_on_rebuild(flow):
    code, doc = cli("ledger", "build", "kimi-k3", "--warehouse", flow["root"], "--json")
    assert code == 0 and doc["model"] == "moonshotai/Kimi-K3"
    cells = {(c["lane"], c["system"], c["backend"], c["version"]): c for c in doc["cells"]}
    l40s = cells[("kda", "l40s", "sglang", "0.5.16")]
    assert (l40s["rows"], l40s["claim"], l40s["status"]) == (1052, 1074, "partial")
    assert {"lane": "kda", "system": "l40s", "backend": "sglang", "version": "0.5.16", "kind": "claim",
            "claim": 1074, "actual": 1052, "delta": -22} in doc["mismatches"]
    assert cells[("megamoe.module", "b200_sxm", "sglang", "0.5.16")]["kernel_sources"] == ["deepgemm_megamoe"]
    assert doc["by_status"]["missing"] == 37
    before = stored_events(flow["wh"], "moonshotai/Kimi-K3").height
    cli("ledger", "build", "kimi-k3", "--warehouse", flow["root"], "--json")
    assert stored_events(flow["wh"], "moonshotai/Kimi-K3").height == before


def test_as_of_the_first_ingest(flow):
    code, doc = cli("ledger", "build", "kimi-k3", "--warehouse", flow["root"], "--as-of", str(flow["batches_v1"]), "--json")
    assert code == 0
    l40s = next(c for c in doc["cells"] if c["system"] == "l40s" and c["lane"] == "kda" and c["backend"] == "sglang")
    assert l40s["rows"] == 1074
    assert not [m for m in doc["mismatches"] if m["system"] == "l40s" and m["backend"] == "sglang"]
    code, doc = cli("ledger", "build", "kimi-k3", "--warehouse", flow["root"], "--as-of", "999", "--json")
    assert code == 2 and "no version 999" in doc["error"]
    code, doc = cli("ledger", "build", "kimi-k3", "--warehouse", flow["root"], "--as-of", "yesterday", "--json")
    assert code == 2 and "--as-of 'yesterday'" in doc["error"]


def test_decide_matrix_and_report(flow, tmp_path):
    root = flow["root"]
    assert cli("ledger", "decide", "kimi-k3", "--date", "2026-08-04", "--text", "Prune h12 <decode> rows",
               "--lane", "kda", "--warehouse", root, "--json")[0] == 0
    assert cli("ledger", "decide", "kimi-k3", "--date", "2026-08-04", "--text", "x", "--lane", "nope",
               "--warehouse", root, "--json")[0] == 2
    code, doc = cli("matrix", "import", str(MATRIX_STATES / "k3-merge-a77804e"), "--label", "k3-merge",
                    "--warehouse", root, "--json")
    assert code == 0 and doc["rows"] == 13032 and doc["models"]["moonshotai/Kimi-K3"] == 228
    code, doc = cli("matrix", "import", str(MATRIX_STATES / "head-095f58a"), "--label", "head", "--warehouse", root, "--json")
    assert code == 0 and doc["by_status"]["PASS"] == 7367
    k3_merge = cli("matrix", "count", "--model", "moonshotai/Kimi-K3", "--label", "k3-merge", "--warehouse", root, "--json")
    assert k3_merge[1]["rows"] == 228
    assert cli("matrix", "count", "--model", "moonshotai/Kimi-K3", "--warehouse", root, "--json")[1]["rows"] == 236
    for name in ("kimi-k3", "moonshotai/kimi-k3"):  # one model naming: lane-spec name, HF id in any case
        assert cli("matrix", "count", "--model", name, "--warehouse", root, "--json")[1]["rows"] == 236
    code, doc = cli("matrix", "count", "--model", "kimi-k2", "--warehouse", root, "--json")
    assert code == 1 and "did you mean" in doc["error"] and "kimi-k3" in doc["error"]  # not 0 rows and exit 0
    code, doc = cli("matrix", "compare", "k3-merge", "head", "--model", "kimi-k3", "--warehouse", root, "--json")
    assert code == 1 and doc["model"] == "moonshotai/Kimi-K3" and doc["added"] + doc["removed"] < 3400
    code, doc = cli("matrix", "compare", "k3-merge", "head", "--warehouse", root, "--json")
    assert code == 1 and (doc["added"], doc["removed"], doc["blocking"]) == (3400, 2024, 0)  # changes, none blocking
    code, doc = cli("matrix", "compare", str(wheel_systems() / "support_matrix"), "head", "--warehouse", root, "--json")
    assert code == 3 and doc["blocking"] > 0 and doc["exit_code"] == 3  # blocking has its own code: not a usage error
    assert cli("matrix", "compare", "head", "head", "--warehouse", root, "--json")[0] == 0
    assert cli("matrix", "count", "--model", "m", "--label", "nope", "--warehouse", root, "--json")[0] == 1
    md, html = tmp_path / "k3.md", tmp_path / "k3.html"
    assert cli("ledger", "report", "kimi-k3", "--format", "md", "--out", str(md), "--warehouse", root)[0] == 0
    assert cli("ledger", "report", "kimi-k3", "--format", "html", "--out", str(html), "--warehouse", root)[0] == 0
    text = md.read_text()
    for to_stdout in (["--out", "-"], []):  # the document itself (its render time aside), nothing else
        printed = runner.invoke(app, ["ledger", "report", "kimi-k3", *to_stdout, "--warehouse", root]).stdout
        assert printed.splitlines()[0] == text.splitlines()[0] and "claimed 1074, found 1052 (-22)" in printed
        assert len(printed.splitlines()) == len(text.splitlines())
    assert cli("ledger", "report", "kimi-k3", "--json", "--warehouse", root)[0] == 2  # stdout is the JSON's
    assert "**2026-08-04** [kda]: Prune h12 &lt;decode&gt; rows" in text and "<decode>" not in text
    assert "prune 1074 → 1052 (22 rows removed" in text
    assert "claimed 1074, found 1052 (-22)" in text
    assert "Snapshot `head`: 236 rows for this model; union of keys in the snapshot: 244." in text
    page = html.read_text()
    assert "Prune h12 &lt;decode&gt; rows" in page and "<decode>" not in page


def test_bad_input_exit_codes(flow, tmp_path):
    bad = tmp_path / "b200_sxm.csv"
    bad.write_text("HuggingFaceID,Architecture,System,Backend,Version,Mode,Status,ErrMsg,Command,Source\n"
                   "m,A,b200_sxm,vllm,0.24.0,agg,GREAT,,c,\n")
    code, doc = cli("matrix", "import", str(bad), "--label", "bad", "--warehouse", flow["root"], "--json")
    assert code == 1 and "b200_sxm.csv:2: column Status: unknown status 'GREAT'" in doc["error"]
    assert cli("matrix", "compare", str(bad), "head", "--warehouse", flow["root"], "--json")[0] == 2
    assert cli("ledger", "build", "no-such-model", "--warehouse", flow["root"], "--json")[0] == 1
    pdf = cli("ledger", "report", "kimi-k3", "--format", "pdf", "--out", str(tmp_path / "x"), "--warehouse", flow["root"])
    assert pdf[0] == 2
    empty = tmp_path / "empty-wh"
    code, doc = cli("ledger", "build", "kimi-k3", "--warehouse", str(empty), "--json")
    assert code == 1 and "no curated tables" in doc["error"]


def test_warm_state_is_reused_and_refreshed_by_the_hook(flow):
    from perfledger.ledger.source import build_cells
    from perfledger.ledger.specs import find_spec
    from perfledger.ledger.state import current_cells, fresh_cells

    wh, spec = flow["wh"], find_spec("kimi-k3")
    cells, reused = current_cells(wh, spec, record=True)
    assert fresh_cells(wh, spec) is not None
    assert current_cells(wh, spec, record=True)[1] is True
    ingest([str(SHARED_DATA / "gb200/kda/sglang/0.5.16")], wh, on_commit=on_ingest)
    warm = fresh_cells(wh, spec)
    assert warm is not None  # the hook refreshed the touched partition and re-keyed the state
    assert warm.drop("first_ingest", "last_ingest").equals(build_cells(wh, spec).drop("first_ingest", "last_ingest"))
    gb200 = warm.filter((pl.col("lane") == "kda") & (pl.col("system") == "gb200") & (pl.col("backend") == "sglang"))
    assert gb200["rows"].to_list() == [976]
    ingest([str(SHARED_DATA / "gb300/kda/sglang/0.5.16")], wh)  # no hook wired: the state goes stale
    assert fresh_cells(wh, spec) is None


def test_events_command(flow):
    code, doc = cli("ledger", "events", "moonshotai/Kimi-K3", "--warehouse", flow["root"], "--json")
    assert code == 0 and doc["model"] == "moonshotai/Kimi-K3"
    assert [e["kind"] for e in doc["events"]].count("prune") == 1


def test_report_replaces_a_symlink_planted_at_out(flow, tmp_path):
    """`ledger report --out FILE` writes a new file: a symlink at FILE is replaced, its target left as it was."""
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("keep me")
    out = tmp_path / "site" / "k3.md"
    out.parent.mkdir()
    out.symlink_to(victim)
    assert cli("ledger", "report", "kimi-k3", "--format", "md", "--out", str(out), "--warehouse", flow["root"])[0] == 0
    assert victim.read_text() == "keep me"
    assert not out.is_symlink() and out.read_text().startswith("#")


def test_hook_catches_up_ignores_unknown_batches_and_report_as_of(flow, tmp_path):
    # the hookless gb300 ingest above is caught up by the next call, once
    assert on_ingest(flow["wh"], []) >= 1
    assert on_ingest(flow["wh"], []) == 0
    assert on_ingest(flow["wh"], ["no-such-batch"]) == 0
    out = tmp_path / "asof.md"
    code, _ = cli("ledger", "report", "kimi-k3", "--format", "md", "--out", str(out), "--warehouse", flow["root"],
                  "--as-of", str(flow["batches_v1"]))
    assert code == 0
    text = out.read_text()
    assert "as of " in text and "| kda | l40s | sglang 0.5.16 |" in text and "| 1074 |" in text
    assert "prune 1074 → 1052" not in text  # the prune happened after that version
