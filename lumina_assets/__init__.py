"""Lumina."""
