"""Pipelines: ingest (extract → reconcile → delta) and context building."""
