"""Support-matrix snapshots: CSV import, counts, comparison between two states."""
