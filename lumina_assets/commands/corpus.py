"""Subcommands of this stage (placeholder until the stage adds its own)."""


def add_commands(commands, bench_commands) -> None:
    """Register subcommands on `lumina` and `lumina bench`."""
