"""Where perf rows come from: perf sources (tree, warehouse), cross-backend lenders, table catalog, system specs."""
