"""The pipeline's matrix stage stores the imported snapshot and builds ours from the warehouse."""

from __future__ import annotations


def test_matrix_stage_builds_our_matrix_beside_the_imported_one(published_site: dict) -> None:
    built = published_site["built_matrix"]
    assert built["label"] == "perfledger"
    assert built["models"] == {"moonshotai/Kimi-K3": built["rows"]} and built["rows"] > 0
    statuses = set(built["by_status"])
    assert statuses <= {"PASS", "HYBRID_PASS", "FAIL", "HW_INCOMPATIBLE", "FRAMEWORK_INCOMPATIBLE"}
    assert published_site["matrix"]["label"] == "head"
