"""`lumina` subcommands, one module per stage."""
