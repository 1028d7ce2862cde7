"""Developer benches that print figures (scale, serve load, encoder forms). They live in the checkout, not in the
installed package; `lumina bench scale|serve|embed` finds them here (lumina_assets/cli/main.py)."""
