"""Op registry: op family name -> OpModel instance."""

from __future__ import annotations

from perfledger.estimator.ops.base import OpModel


def registry() -> dict[str, OpModel]:
    from perfledger.estimator.ops.gemm import GemmModel
    from perfledger.estimator.ops.allreduce import CustomAllReduceModel
    from perfledger.estimator.ops.attention import ContextAttentionModel
    from perfledger.estimator.ops.comm import NcclModel
    from perfledger.estimator.ops.dsa_module import DsaContextModuleModel, DsaGenerationModuleModel
    from perfledger.estimator.ops.generation import GenerationAttentionModel
    from perfledger.estimator.ops.kda import KdaModel
    from perfledger.estimator.ops.mla import ContextMlaModel, GenerationMlaModel, MlaBmmModel
    from perfledger.estimator.ops.mla_module import ContextMlaModuleModel, GenerationMlaModuleModel
    from perfledger.estimator.ops.moe import MoeModel

    models = [GemmModel(), MoeModel(), NcclModel(), CustomAllReduceModel(), ContextAttentionModel(),
              GenerationAttentionModel(), ContextMlaModel(), GenerationMlaModel(), MlaBmmModel(), KdaModel(),
              ContextMlaModuleModel(), GenerationMlaModuleModel(), DsaContextModuleModel(), DsaGenerationModuleModel()]
    return {m.name: m for m in models}


def get_model(name: str) -> OpModel:
    models = registry()
    if name not in models:
        raise KeyError(f"unknown op {name!r}; known: {', '.join(models)}")
    return models[name]
