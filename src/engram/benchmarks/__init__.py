"""Benchmarks behind ``engram bench``: they run Engram through its public API."""
