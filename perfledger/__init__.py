"""perfledger: a versioned perf database and everything derived from it."""
