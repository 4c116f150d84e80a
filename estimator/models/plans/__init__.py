"""Layer plans: per architecture kind, the ops one forward pass prices (registered in this package)."""
