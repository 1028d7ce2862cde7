"""Placeholder: this stage's assets are being written (see the open issue)."""

ASSETS: list = []
CHECKS: list = []


def build_resources() -> dict:
    return {}
