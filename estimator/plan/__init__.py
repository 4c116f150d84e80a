"""Deployment planning: the search for the best way to serve a model on N GPUs under a TTFT / TPOT SLA."""
