"""MLA ops: per-kernel context / generation / BMM tables and the whole-block module tables."""
