"""collector stage: run operator micro-benchmarks on a device pool and write the staging batch ingest reads."""
