"""Bring-up ledger and support matrix: lane specs, derived cells, events, decisions, matrix snapshots."""
