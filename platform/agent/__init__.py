"""The agent: orchestrator, planning service, sessions and workflow templates."""
