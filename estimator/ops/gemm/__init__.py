"""GEMM op: per-(n, k) m-curves (sites) and nearest-site transfer."""
