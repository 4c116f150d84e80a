"""generator stage."""
