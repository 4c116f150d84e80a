"""DeepSeek-V4 module ops: the CSA / HCA compressed-attention modules, their top-k calibration, and mHC."""
