"""Op registry: op family name -> OpModel instance."""

from __future__ import annotations

from estimator.ops.base import OpModel


def registry() -> dict[str, OpModel]:
    from estimator.ops.gemm import GemmModel
    from estimator.ops.allreduce import CustomAllReduceModel
    from estimator.ops.attention import ContextAttentionModel
    from estimator.ops.comm import NcclModel
    from estimator.ops.dsa_module import DsaContextModuleModel, DsaGenerationModuleModel
    from estimator.ops.generation import GenerationAttentionModel
    from estimator.ops.kda import KdaModel
    from estimator.ops.mla import ContextMlaModel, GenerationMlaModel, MlaBmmModel
    from estimator.ops.mla_module import ContextMlaModuleModel, GenerationMlaModuleModel
    from estimator.ops.moe import MoeModel

    models = [GemmModel(), MoeModel(), NcclModel(), CustomAllReduceModel(), ContextAttentionModel(),
              GenerationAttentionModel(), ContextMlaModel(), GenerationMlaModel(), MlaBmmModel(), KdaModel(),
              ContextMlaModuleModel(), GenerationMlaModuleModel(), DsaContextModuleModel(), DsaGenerationModuleModel()]
    return {m.name: m for m in models}


def get_model(name: str) -> OpModel:
    models = registry()
    if name not in models:
        raise KeyError(f"unknown op {name!r}; known: {', '.join(models)}")
    return models[name]
