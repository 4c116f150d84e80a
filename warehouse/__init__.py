"""warehouse stage."""
