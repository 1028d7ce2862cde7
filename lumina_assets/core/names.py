"""Author names reduced to what matching needs: the index stores last names, and queries name authors by them."""

from __future__ import annotations

import re


def last_name(name: str) -> str:
    """Lower-cased last word of a name, initials and quotes dropped ("J. R. R. Tolkien" -> "tolkien")."""
    parts = [
        p for p in re.split(r"[\s,]+", name.strip().strip("\"'")) if p and not re.fullmatch(r"[A-Z]\.?", p)
    ]
    return parts[-1].lower() if parts else ""
