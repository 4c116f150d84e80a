"""Op registry: op family name -> its OpModel, built once per process (op models hold no per-call state)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType

from perfledger.estimator.ops.allreduce import CustomAllReduceModel
from perfledger.estimator.ops.attention.context import ContextAttentionModel
from perfledger.estimator.ops.attention.encoder import EncoderAttentionModel
from perfledger.estimator.ops.attention.generation import GenerationAttentionModel
from perfledger.estimator.ops.base import OpModel
from perfledger.estimator.ops.comm import NcclModel
from perfledger.estimator.ops.dsa.module import DsaContextModuleModel, DsaGenerationModuleModel
from perfledger.estimator.ops.dsa.msa import MsaContextModuleModel, MsaGenerationModuleModel
from perfledger.estimator.ops.dsv4.megamoe import MegaMoeModel
from perfledger.estimator.ops.dsv4.mhc import MhcModuleModel
from perfledger.estimator.ops.dsv4.module import Dsv4ContextModuleModel, Dsv4GenerationModuleModel
from perfledger.estimator.ops.gdn import GdnModel
from perfledger.estimator.ops.gemm.op import GemmModel
from perfledger.estimator.ops.kda import KdaModel
from perfledger.estimator.ops.mamba2 import Mamba2Model
from perfledger.estimator.ops.mla.kernels import ContextMlaModel, GenerationMlaModel, MlaBmmModel
from perfledger.estimator.ops.mla.module import ContextMlaModuleModel, GenerationMlaModuleModel
from perfledger.estimator.ops.moe import MoeModel
from perfledger.estimator.ops.moe_a2a import MoeAllToAllModel
from perfledger.estimator.ops.wideep import WideEpContextMlaModel, WideEpGenerationMlaModel, WideEpMoeModel

OP_MODELS = (GemmModel, MoeModel, NcclModel, CustomAllReduceModel, ContextAttentionModel, GenerationAttentionModel,
             ContextMlaModel, GenerationMlaModel, MlaBmmModel, KdaModel, ContextMlaModuleModel, GenerationMlaModuleModel,
             DsaContextModuleModel, DsaGenerationModuleModel, GdnModel, Mamba2Model, Dsv4ContextModuleModel,
             Dsv4GenerationModuleModel, MhcModuleModel, MegaMoeModel,
             MsaContextModuleModel, MsaGenerationModuleModel, EncoderAttentionModel, MoeAllToAllModel,
             WideEpMoeModel, WideEpContextMlaModel, WideEpGenerationMlaModel)


@cache
def registry() -> Mapping[str, OpModel]:
    """Every op model by name (read-only: one shared instance per op)."""
    return MappingProxyType({model.name: model for model in (cls() for cls in OP_MODELS)})


def get_model(name: str) -> OpModel:
    models = registry()
    if name not in models:
        raise KeyError(f"unknown op {name!r}; known: {', '.join(models)}")
    return models[name]
