"""`lumina` console script. Each stage adds its own subcommands, so this file only wires them together."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = (
    "lumina_assets.cli.parsing",
    "lumina_assets.cli.search",
    "lumina_assets.cli.evaluation",
    "lumina_assets.cli.benchmark",
    "lumina_assets.cli.ops",
    "lumina_assets.cli.catalogue",
    "lumina_assets.cli.orchestration",
    "lumina_assets.cli.scale",
    "lumina_assets.cli.serve",
    "lumina_assets.cli.collections",
    "lumina_assets.cli.export",
    "lumina_assets.cli.alerts",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lumina", description="Lumina: passage-level academic search and its benchmark"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser("bench", help="speed and quality benchmarks that print figures")
    bench_commands = bench.add_subparsers(dest="bench_command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_commands(commands, bench_commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
