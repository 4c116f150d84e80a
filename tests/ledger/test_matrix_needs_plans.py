"""One source of what a model needs: every op a static layer plan prices is a matrix need of its architecture.

The matrix (needs.yaml) and the static estimate (models.yaml + models/plans/) describe the same layers; a plan op the
needs never ask for would let a matrix row PASS on data the static estimate then misses. Per architecture both
describe and per backend the plan runs on, both phases' plan ops (rooflined mem ops aside; KDA ops with their
kernel) must be asked by a plain need or by an `any_of` option open to that backend, in agg or disagg.
"""

from __future__ import annotations

import pytest

from perfledger import settings
from perfledger.estimator.models.config import catalog, read_config
from perfledger.estimator.models.plans.registry import PLANS, load_model
from perfledger.estimator.static import Deploy
from perfledger.ledger.matrix.choices import Choice
from perfledger.ledger.matrix.needs import derive_needs, load_needs, model_dims

BACKENDS = ("trtllm", "sglang", "vllm")
BF16 = {f"{q}_quant": "bfloat16" for q in ("gemm", "moe", "kv", "fmha")}


def config_of(architecture: str):
    """The first model config (wheel, then reference data) of an architecture."""
    for folder in settings.model_config_dirs():
        for path in sorted(folder.glob("*_config.json")):
            if not path.name.endswith("_hf_quant_config.json"):
                config = read_config(path)
                if config.architecture == architecture:
                    return config
    raise AssertionError(f"no model config of {architecture} in {settings.model_config_dirs()}")


def plan_ops(ops, asked: set[tuple[str, str | None]]) -> set[tuple[str, str | None]]:
    """(estimator op, KDA kernel or None) of an op list, overlapped groups flattened, mem ops left out; a `fallback`
    op (primary ops, else the fallback ops on a miss) needs one of its two alternatives asked, so it adds the
    primary's ops unless the fallback's are all asked."""
    out = set()
    for _, op, query, _ in ops:
        if op == "overlap":
            out |= set().union(*(plan_ops(group, asked) for group in query["groups"]))
        elif op == "fallback":
            primary, fallback = plan_ops(query["primary"], asked), plan_ops(query["fallback"], asked)
            out |= fallback if primary - asked and fallback <= asked else primary
        elif op != "mem":
            out.add((op, query.get("kernel")))
    return out


def asked(needs, backend: str) -> set[tuple[str, str | None]]:
    out = set()
    for need in needs:
        options = [o.needs for o in need.options if not o.backends or backend in o.backends] if isinstance(need, Choice) \
            else [(need,)]
        out |= {(n.op, dict(n.query).get("kernel")) for option in options for n in option}
    return out


@pytest.mark.parametrize("architecture", sorted(set(catalog()["architectures"]) & set(load_needs()["architectures"])))
def test_every_plan_op_is_a_need_of_its_architecture(architecture):
    config = config_of(architecture)
    m, doc = load_model(config), load_needs()
    plan = PLANS[m.family["kind"]]
    needs = [n for mode in doc["deployments"]
             for n in derive_needs(architecture, model_dims(config.config, config.path.name, doc["dims"]), {}, mode)]
    for backend in m.family.get("backends") or BACKENDS:
        deploy = Deploy("h200_sxm", backend, "0", tp=8, moe_ep=8, **BF16)
        wanted = asked(needs, backend)
        planned = (plan_ops(plan.ops(m, deploy, 256, True, 1, 384), wanted)
                   | plan_ops(plan.ops(m, deploy, 64, False, 64, 512), wanted))
        missing = planned - wanted
        assert not missing, f"{architecture} on {backend}: the static plan prices {sorted(missing)}, the matrix never asks"


def test_a_plan_op_the_needs_lack_is_found():
    """The check can fail: drop K3's decode kernels from the needs and the sglang plan's pair is reported."""
    config = config_of("KimiK3ForConditionalGeneration")
    m = load_model(config)
    deploy = Deploy("h200_sxm", "sglang", "0", tp=8, moe_ep=8, **BF16)
    doc = load_needs()
    needs = [n for n in derive_needs(config.architecture, model_dims(config.config, config.path.name, doc["dims"]), {},
                                     "agg") if n.name != "kda_decode"]
    wanted = asked(needs, "sglang")
    planned = plan_ops(PLANS[m.family["kind"]].ops(m, deploy, 64, False, 64, 512), wanted)
    assert planned - wanted == {("kda_kernel", "causal_conv1d_update"),
                                                 ("kda_kernel", "fused_recurrent_kda_packed_decode")}
