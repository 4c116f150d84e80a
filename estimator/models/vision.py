"""The vision encoder (ViT) of a VL model: the op list 0.12.0 prices before the prefill when requests carry images.

A request's images add their merged tokens to the prefill (isl + tokens per image x images) and every decode step's
KV; the encoder runs over the images first and its time is part of TTFT. Tokens per image: each side rounded to the
nearest multiple of patch x merge (at least one), pre-merge patches (side / patch)^2, merged tokens / merge^2 as
0.12.0 (its smart-resize rounding; no min / max pixel rescale). Encoder data parallelism (0.12.0's default; vLLM
mm_encoder_tp_mode=data, SGLang --mm-enable-dp-encoder): whole images spread over the tp ranks, the busiest rank
(ceil) gates, every ViT op unsharded and the merged embeddings all-gathered over tp; without it the ViT is
TP-sharded with its two allreduces per block. Shapes: models.yaml `vision_encoders`.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfledger.estimator.errors import EstimatorError
from perfledger.estimator.fit.roofline import elementwise_bytes
from perfledger.estimator.models.config import MODELS_YAML, ModelConfig, catalog
from perfledger.estimator.models.config_expr import evaluate


@dataclass(frozen=True)
class Images:
    """Images per request as 0.12.0's static options name them (--image-height, --image-width, --num-images)."""

    height: int = 0
    width: int = 0
    count: int = 1
    encoder_dp: bool = True  # --disable-encoder-dp turns it off

    @property
    def given(self) -> bool:
        return self.height > 0 and self.width > 0 and self.count > 0


@dataclass(frozen=True)
class Vision:
    """One model's ViT shape (models.yaml `vision_encoders` resolved against its config)."""

    depth: int
    hidden: int
    heads: int
    inter: int
    patch: int
    merge: int
    out_hidden: int
    rope: bool
    projector: tuple[tuple[int, int], ...]
    instances: int

    def tokens(self, images: Images) -> tuple[int, int]:
        """(merged tokens, pre-merge patches) of one image."""
        stride = self.patch * self.merge
        h, w = (max(stride, round(side / stride) * stride) for side in (images.height, images.width))
        return (h // stride) * (w // stride), (h // self.patch) * (w // self.patch)

    def projector_shapes(self, tp: int) -> list[tuple[int, int]]:
        """(n, k) of each projector GEMM on one rank: row-parallel, the last of several column-parallel."""
        last = len(self.projector) - 1
        return [(d_out, d_in // tp) if i == last and last > 0 else (d_out // tp, d_in)
                for i, (d_in, d_out) in enumerate(self.projector)]

    def weight_elements(self, tp: int) -> int:
        """The encoder GEMMs' weights (n x k, x depth or x instances) on one rank; tp: the ViT's sharding (1 under
        encoder DP, every rank a whole replica)."""
        attention = 4 * (self.heads // tp) * (self.hidden // self.heads) * self.hidden  # qkv (3x) + output projection
        ffn = 2 * (self.inter // tp) * self.hidden
        return self.depth * (attention + ffn) + self.instances * sum(n * k for n, k in self.projector_shapes(tp))


def vision(config: ModelConfig, family: dict) -> Vision | None:
    """The model's ViT, None where its architecture has no vision encoder in models.yaml."""
    name = family.get("vision_encoder")
    if not name:
        return None
    rule = catalog()["vision_encoders"][name]
    where = f"{MODELS_YAML.name} vision_encoders.{name}"
    block = config.config.get(rule["config"])
    if not isinstance(block, dict):
        raise EstimatorError(f"{config.path}: no {rule['config']!r} block for the vision encoder ({where})")
    try:
        dims = {dim: int(block[key]) for dim, key in rule["dims"].items()}
    except KeyError as exc:
        raise EstimatorError(f"{config.path}: {rule['config']} lacks {exc} ({where})") from None
    dims.update({dim: len(block.get(key) or ()) for dim, key in (rule.get("counts") or {}).items()})
    projector = rule.get("projector") or {}
    layers = tuple((int(evaluate(a, dims, where)), int(evaluate(b, dims, where))) for a, b in projector.get("layers", ()))
    return Vision(**{k: dims[k] for k in ("depth", "hidden", "heads", "inter", "patch", "merge", "out_hidden")},
                  rope=bool(rule.get("rope")), projector=layers,
                  instances=int(evaluate(str(projector.get("instances", 1)), dims, where)))


def encoder_ops(v: Vision, d, batch: int, images: Images) -> list[tuple[str, str, dict, float]]:
    """(name, op, query, scale) of the encoder phase for `batch` requests: the ViT blocks (× depth) over pre-merge
    patches, each image one attention sequence; the projector (× instances) and the DP all-gather over merged tokens."""
    post, pre = v.tokens(images)
    dp = d.tp if images.encoder_dp else 1
    tp = 1 if images.encoder_dp else d.tp
    n_img = -(-batch * images.count // dp)
    base = {"system": d.system, "backend": d.backend, "version": d.version}
    heads, head_dim, inter, h = v.heads // tp, v.hidden // v.heads, v.inter // tp, v.hidden
    if v.heads % tp or v.inter % tp:
        raise EstimatorError(f"ViT heads {v.heads} / intermediate {v.inter} not divisible by tp {tp}")
    tokens = n_img * pre

    def gemm(m, n, k, lp=False):
        return {**base, "quant": "bfloat16", "m": m, "n": n, "k": k, "low_precision_input": lp}

    def eltwise(dim_in, dim_out, t):
        return {"bytes": elementwise_bytes(dim_in, dim_out, t)}

    ar = {**base, "tp": tp, "elements": tokens * h}
    ops = [("encoder_add_norm_1", "mem", eltwise(2 * h, 2 * h, tokens), v.depth),
           ("encoder_qkv_gemm", "gemm", gemm(tokens, 3 * heads * head_dim, h), v.depth),
           ("encoder_attention", "encoder_attention", {**base, "head_dim": head_dim, "heads": heads, "isl": pre,
                                                       "batch": n_img}, v.depth),
           ("encoder_proj_gemm", "gemm", gemm(tokens, h, heads * head_dim, lp=True), v.depth),
           ("encoder_ar_1", "allreduce", ar, v.depth),
           ("encoder_add_norm_2", "mem", eltwise(2 * h, 2 * h, tokens), v.depth),
           ("encoder_ffn1_gemm", "gemm", gemm(tokens, inter, h), v.depth),
           ("encoder_act", "mem", eltwise(inter, inter, tokens), v.depth),
           ("encoder_ffn2_gemm", "gemm", gemm(tokens, h, inter, lp=True), v.depth),
           ("encoder_ar_2", "allreduce", ar, v.depth)]
    if v.rope:
        ops.append(("encoder_rope_apply", "mem", eltwise(6 * heads * head_dim, 6 * heads * head_dim, tokens), v.depth))
    merged = n_img * post
    for i, ((_, d_out), (m, k)) in enumerate(zip(v.projector, v.projector_shapes(tp), strict=True)):
        ops.append((f"encoder_projector_fc{i}_gemm", "gemm", gemm(merged, m, k), v.instances))
        if i < len(v.projector) - 1:
            ops.append((f"encoder_projector_fc{i}_act", "mem", eltwise(d_out // tp, d_out // tp, merged), v.instances))
    if v.projector:
        ops.append(("encoder_projector_ar", "allreduce", {**base, "tp": tp, "elements": merged * v.projector[-1][1]},
                    v.instances))
    if images.encoder_dp and d.tp > 1:
        ops.append(("encoder_dp_all_gather", "comm", {**base, "op": "all_gather", "quant": "half", "num_gpus": d.tp,
                                                      "elements": merged * v.out_hidden * v.instances * d.tp}, 1))
    return ops


def image_tokens(v: Vision | None, images: Images | None) -> int:
    """Merged image tokens one request adds to the language model's context (0 without images or a ViT)."""
    if v is None or images is None or not images.given:
        return 0
    return v.tokens(images)[0] * images.count
