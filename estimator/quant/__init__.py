"""Quant labels: per-family profiles, the checkpoint's default quants, fp8 static quantize overheads."""
