"""Comparing two runs: launches paired across them, speedups judged against a noise band."""
