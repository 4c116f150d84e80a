"""Prefect flows: thin orchestration over the stage packages."""
