"""Fitting collected samples: rooflines (SOL), nested grids, 1-D curves, util grids, quant-transfer references."""
