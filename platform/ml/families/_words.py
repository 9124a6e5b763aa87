"""Word boundaries for the families' English terms (CJK text has no spaces)."""

from __future__ import annotations

W = r"(?<![a-z0-9_])"  # word start for ASCII terms
E = r"(?![a-z0-9_])"  # word end
