"""Tracking: MLflow runs, artifacts and models; the MongoDB metadata store; the registry.

Tracking knows nothing of the agent, the CLI or the dashboard.
"""
