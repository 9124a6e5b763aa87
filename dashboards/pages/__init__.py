"""Dashboard pages, one per file; Dash imports them (use_pages=True)."""
