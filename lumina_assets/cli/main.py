"""`lumina` console script. Each stage adds its own subcommands, so this file only wires them together."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

from lumina_assets.cli.messages import BUILD_INDEX, fail

COMMAND_MODULES = (
    "lumina_assets.cli.parse",
    "lumina_assets.cli.search",
    "lumina_assets.cli.evaluation",
    "lumina_assets.cli.benchmark",
    "lumina_assets.cli.ops",
    "lumina_assets.cli.catalogue",
    "lumina_assets.cli.orchestration",
    "lumina_assets.cli.serve",
    "lumina_assets.cli.collections",
    "lumina_assets.cli.export",
    "lumina_assets.cli.alerts",
)

# a command a person waits on is parsed with its own module alone: importing every other command's module costs
# more than a search through a running server
LIGHT_COMMANDS = {"search": ("lumina_assets.cli.search",)}


class Parser(argparse.ArgumentParser):
    """A usage error is one line that names the command's --help, not the usage block (subcommands inherit this)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (`{self.prog} --help` lists what it takes)\n")


def build_parser(modules: tuple[str, ...] = COMMAND_MODULES) -> argparse.ArgumentParser:
    parser = Parser(prog="lumina", description="Lumina: passage-level academic search and its benchmark")
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser("bench", help="speed and quality benchmarks that print figures")
    bench_commands = bench.add_subparsers(dest="bench_command", required=True)
    for name in modules:
        importlib.import_module(name).add_commands(commands, bench_commands)
    for name in checkout_bench_modules():
        importlib.import_module(name).add_commands(commands, bench_commands)
    return parser


def checkout_bench_modules() -> tuple[str, ...]:
    """The developer benches in the checkout's `bench/` folder (not installed with the package), where it is there."""
    from lumina_assets.core.settings import PROJECT_ROOT

    if not (PROJECT_ROOT / "bench" / "__init__.py").is_file():
        return ()
    if str(PROJECT_ROOT) not in sys.path:
        sys.path.append(str(PROJECT_ROOT))
    return (
        "bench.scale",
        "bench.embed",
        "bench.parse",
        "bench.incremental",
        "bench.search",
        "bench.judge",
        "bench.responsiveness",
        "bench.alerts",
    )


def main(argv: list[str] | None = None) -> int:
    """Every error ends in one line on stderr and a non-zero status (LUMINA_DEBUG=1 keeps the traceback); a closed
    pipe ends the command quietly."""
    command = "lumina"
    try:
        words = sys.argv[1:] if argv is None else argv
        args = build_parser(LIGHT_COMMANDS.get(words[0] if words else "", COMMAND_MODULES)).parse_args(argv)
        # e.g. "lumina bench search": the command and its subcommand (bench_command, eval_command, ...)
        command = " ".join(
            ["lumina", args.command]
            + [v for k, v in vars(args).items() if k.endswith("_command") and isinstance(v, str)]
        )
        status = int(args.handler(args) or 0)
        sys.stdout.flush()  # a closed pipe shows up here, not in the interpreter's own flush at exit
        return status
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except BrokenPipeError:
        _discard_stdout()
        return 128 + signal.SIGPIPE  # what a command killed by SIGPIPE returns
    except Exception as error:
        from lumina_assets.core import settings

        try:
            debug = settings.get().orchestration.debug
        except settings.SettingsError:  # the error being reported may be that very setting
            debug = False
        if debug:
            raise
        status, line = error_line(command, error)
        print(line, file=sys.stderr)
        return status


def error_line(command: str, error: Exception) -> tuple[int, str]:
    """(exit status, one line) for an error no command handled itself."""

    text = " ".join(str(error).split()) or type(error).__name__
    stores = sys.modules.get("lumina_assets.search.stores")
    if stores is not None and isinstance(error, stores.IndexNotBuilt):
        return 2, f"No search index yet ({text}): {BUILD_INDEX}."
    if stores is not None and isinstance(error, stores.IndexModelMismatch):
        return 2, f"{command}: cannot use this index: {text}"
    collections = sys.modules.get("lumina_assets.corpus.collections")
    if collections is not None and isinstance(error, collections.CollectionError):
        return 2, f"{command}: {text}"
    if isinstance(error, OSError):
        return 1, f"{command}: {text}"
    return 1, f"{command} failed: {type(error).__name__}: {text} (LUMINA_DEBUG=1 shows where)"


def _discard_stdout() -> None:
    """Point stdout at /dev/null so the flush at exit cannot raise again (Python's documented recipe)."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
