"""Case grids (YAML) for the collector ops; a package so the YAML ships as package data."""
