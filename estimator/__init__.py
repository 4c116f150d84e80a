"""estimator stage."""
