"""DeepSeek-V4 MegaMoE routed module against aiconfigurator-core 0.12.0 on every slice holding its table, in every
mode (SILICON / HYBRID measured only, EMPIRICAL / SOL refused on both sides), and wired into the static estimate."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from perfledger.estimator.batch import estimate_one
from perfledger.estimator.errors import EstimatorError
from tests.estimator.conftest import assert_static_equals_compiled

TABLE = "dsv4_megamoe_module_perf.parquet"
SHAPE = ("hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size")


def _slices() -> list[tuple[str, str, str, Path]]:
    import aiconfigurator_core

    data = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    return sorted((p.parts[-5], p.parts[-3], p.parts[-2], p) for p in data.glob(f"*/moe/*/*/{TABLE}"))


def _reference(oracle, handle, query: dict):
    from aiconfigurator_core.sdk.operations import DeepSeekV4MegaMoEModule

    context = query["phase"] == "context"
    op = DeepSeekV4MegaMoEModule("m", 1.0, query["hidden"], query["inter"], query["topk"], query["experts"], query["tp"],
                                 query["ep"], oracle.common.MoEQuantMode[query["quant"]], query["distribution"],
                                 is_context=context)
    try:
        return handle.evaluate_ops_json(oracle.build([op]), is_context=context, batch_size=1, s=1, x=query["tokens"])[0][1]
    except Exception as exc:  # the reference's typed misses
        assert "PerfDataNotAvailable" in type(exc).__name__, exc
        return None


def _queries(rng: random.Random, rows: pl.DataFrame, n: int) -> list[dict]:
    """Shapes held by the table (sometimes an EP or distribution it lacks), tokens on and off the grid."""
    shapes = rows.select(*SHAPE).unique().rows()
    dists = [*rows["distribution"].unique().sort().to_list(), "uniform", "power_law"]
    grid = rows["num_tokens"].unique().to_list()
    out = []
    for _ in range(n):
        hidden, inter, topk, experts, tp, ep = rng.choice(shapes)
        ep = ep if rng.random() < 0.85 else ep + 2
        tokens = rng.choice(grid) if rng.random() < 0.3 else int(10 ** rng.uniform(0, 6.3))
        out.append(dict(phase=rng.choice(["context", "generation"]), distribution=rng.choice(dists),
                        quant=rows["moe_dtype"][0], hidden=hidden, inter=inter, topk=topk, experts=experts, tp=tp, ep=ep,
                        tokens=tokens))
    return out


@pytest.mark.aic
@pytest.mark.parametrize("mode", ["SILICON", "HYBRID", "EMPIRICAL", "SOL"])
def test_megamoe_matches_reference_on_every_slice(wheel_est, oracle, monkeypatch, mode):
    """Random questions per slice: 0 differ beyond 1e-9 relative, the same misses; SILICON answers most."""
    monkeypatch.setenv("AIC_ALLOW_UNLISTED_VERSIONS", "1")  # gb200 / gb300 hold the table at an unlisted version
    rng, slices, answered, asked = random.Random(14), _slices(), 0, 0
    assert len(slices) >= 3, slices
    for system, backend, version, path in slices:
        handle = oracle.handle(system, backend, version, mode)
        for query in _queries(rng, pl.read_parquet(path), 40):
            where = dict(system=system, backend=backend, version=version)
            ref = _reference(oracle, handle, query)
            try:
                ours = estimate_one(wheel_est, "dsv4_megamoe", mode=mode.lower(), **where, **query)["latency_ms"]
            except EstimatorError:
                ours = None
            assert (ours is None) == (ref is None), f"one-sided miss {where} {query}: ours={ours} ref={ref}"
            if ref is not None:
                assert ours == pytest.approx(ref, rel=1e-9), f"{where} {query}"
            answered, asked = answered + (ref is not None), asked + 1
    if mode in ("SILICON", "HYBRID"):
        assert answered >= asked // 2, f"{answered} of {asked} answered"
    else:
        assert answered == 0


def _overlay(src: Path, dst: Path, along: tuple[str, ...], extra: Path) -> None:
    """dst mirrors src by symlinks, except the folders `along`, rebuilt with `extra` linked into the last."""
    dst.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if along and item.name == along[0]:
            _overlay(item, dst / item.name, along[1:], extra)
        else:
            (dst / item.name).symlink_to(item)
    if not along:
        (dst / extra.name).symlink_to(extra)


@pytest.fixture(scope="module")
def megamoe_systems(tmp_path_factory, aic_core):
    """The wheel's systems folder with gb300's MegaMoE table (collected at sglang 0.5.10, where no mHC / DSv4 attention
    rows exist) also filed under 0.5.14 beside them, so one version prices a whole DeepSeek-V4 MegaMoE deployment; both
    sides read this same tree."""
    from perfledger import settings

    systems, root = settings.aic_package_dir() / "systems", tmp_path_factory.mktemp("megamoe_systems")
    _overlay(systems, root, ("data", "gb300", "moe", "sglang", "0.5.14"),
             systems / "data" / "gb300" / "moe" / "sglang" / "0.5.10" / TABLE)
    return root


@pytest.mark.aic
@pytest.mark.parametrize("par,shape", [((8, 1, 8), (4, 1000, 40)), ((4, 1, 4), (3, 3000, 70))])
def test_static_megamoe_deployment_matches_engine_per_op(megamoe_systems, monkeypatch, par, shape):
    """DeepSeek-V4-Pro on gb300 SGLang with moe_backend=megamoe (0.12.0's ModelConfig field; its compile entry has no
    keyword for it, so the reference's config builder sets it): the same ops per phase, each within 1e-9."""
    import aiconfigurator_core.sdk.engine as engine

    from perfledger.estimator.data.sources import TreeSource
    from perfledger.estimator.session import Estimator
    from perfledger.estimator.static import Deploy, static

    build = engine.build_model_config

    def with_megamoe(**kw):
        config = build(**kw)
        config.moe_backend = "megamoe"
        return config

    monkeypatch.setattr(engine, "build_model_config", with_megamoe)
    (tp, moe_tp, moe_ep), (batch, isl, osl), model = par, shape, "deepseek-ai/DeepSeek-V4-Pro"
    ref = engine.EngineHandle.compile(model, "gb300", "sglang", backend_version="0.5.14", tp_size=tp, moe_tp_size=moe_tp,
                                      moe_ep_size=moe_ep, systems_path=str(megamoe_systems))
    est = Estimator(TreeSource(megamoe_systems / "data"))
    ours = static(est, model, Deploy("gb300", "sglang", "0.5.14", tp=tp, moe_tp=moe_tp, moe_ep=moe_ep, moe_backend="megamoe"),
                  batch=batch, isl=isl, osl=osl)
    assert ours["context"]["megamoe"] > 0
    assert_static_equals_compiled(ours, ref, shape, op_rel=1e-9)


@pytest.mark.aic
@pytest.mark.parametrize("change,match", [(dict(backend="trtllm", version="1.3.0rc23"), "needs backend sglang"),
                                          (dict(moe_tp=2, moe_ep=4), "moe_tp 1"), (dict(moe_backend="deepep"), "not priced")])
def test_megamoe_deployments_0_12_0_refuses_are_refused(wheel_est, change, match):
    from perfledger.estimator.errors import UnsupportedModelError
    from perfledger.estimator.static import Deploy, static

    d = dict(system="gb300", backend="sglang", version="0.5.14", tp=8, moe_tp=1, moe_ep=8, moe_backend="megamoe")
    with pytest.raises(UnsupportedModelError, match=match):
        static(wheel_est, "deepseek-ai/DeepSeek-V4-Pro", Deploy(**{**d, **change}), batch=1, isl=100, osl=2)


@pytest.mark.aic
def test_cli_moe_backend_prices_megamoe_and_refuses_elsewhere(megamoe_systems):
    """`estimate static --moe-backend megamoe` is the MegaMoE deployment (TTFT / TPOT of `static` with it, not the
    default MoE's); a backend MegaMoE does not serve exits 1 naming the rule."""
    import json

    from typer.testing import CliRunner

    from perfledger.cli import app
    from perfledger.estimator.data.sources import TreeSource
    from perfledger.estimator.session import Estimator
    from perfledger.estimator.static import Deploy, static

    args = ["estimate", "static", "--model", "deepseek-ai/DeepSeek-V4-Pro", "--system", "gb300", "--backend", "sglang",
            "--version", "0.5.14", "--tp", "8", "--moe-ep", "8", "--batch", "2", "--isl", "500", "--osl", "8",
            "--data", str(megamoe_systems / "data"), "--json"]
    res = CliRunner().invoke(app, [*args, "--moe-backend", "megamoe"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    want = static(Estimator(TreeSource(megamoe_systems / "data")), "deepseek-ai/DeepSeek-V4-Pro",
                  Deploy("gb300", "sglang", "0.5.14", tp=8, moe_ep=8, moe_backend="megamoe"), batch=2, isl=500, osl=8)
    assert (out["ttft_ms"], out["tpot_ms"]) == (want["ttft_ms"], want["tpot_ms"])
    refused = CliRunner().invoke(app, [*args, "--moe-backend", "megamoe", "--moe-ep", "1", "--tp", "1"])
    assert refused.exit_code == 1 and "moe_ep >= 2" in refused.output, refused.output
