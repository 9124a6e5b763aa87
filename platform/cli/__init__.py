"""The mlpilot command line (Typer). See ``mlpilot --help``."""
