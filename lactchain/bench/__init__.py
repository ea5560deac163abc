"""Benchmark plumbing: same-budget comparisons, carried cells, replica costs, figures."""
