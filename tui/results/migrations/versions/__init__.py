"""One file per schema revision; each names the one it revises."""
