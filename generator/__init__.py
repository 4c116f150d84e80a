"""Generator stage: unified deployment YAML + overrides -> engine flags, run scripts, Kubernetes manifests.

Entry point for the pipeline: `generator.api.generate`; see docs/generator.md.
"""
