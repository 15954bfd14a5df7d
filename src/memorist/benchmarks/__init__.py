"""Benchmarks behind ``memorist bench``: they run Memorist through its public API."""
