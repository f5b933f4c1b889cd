"""Development tools of the repository (not shipped in the wheel)."""
