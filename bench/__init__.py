"""Benchmarks, run by hand (make bench); they print figures and assert nothing."""
