"""Whole models: the HF-config reader, layer plans per architecture, memory, DSA prefill."""
