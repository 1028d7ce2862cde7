"""Developer benches that print figures. They live in the checkout, not in the installed package; every `lumina
bench` command finds them here (lumina_assets/cli/main.py)."""
