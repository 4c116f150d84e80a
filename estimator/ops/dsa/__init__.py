"""DSA module ops (GLM-5 sparse attention) and their roofline."""
