"""`lumina ui` (the Dagster UI, stopped whole by Ctrl-C / SIGTERM) and `lumina pools apply|show` (per-pool
concurrency limits on the Dagster instance)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lumina_assets.cli.messages import fail


def run_pools(args) -> int:
    from lumina_assets.cli.runner import instance as project_instance
    from lumina_assets.defs.instance_storage import pool_limits
    from sensors.pools import POOL_LIMITS, apply_pool_limits

    instance = project_instance()
    if args.action == "apply":
        applied = apply_pool_limits(instance)
        print(f"pool limits set on the instance at {instance.root_directory}:")
        for pool, limit in applied.items():
            print(f"  {pool:18} {limit}")
        return 0
    current = pool_limits(instance)
    default = instance.get_concurrency_config().pool_config.default_pool_limit
    print(f"instance {instance.root_directory}: default limit for other pools = {default}")
    for pool in sorted(set(current) | set(POOL_LIMITS)):
        configured = current.get(pool, "unset (default applies)")
        print(f"  {pool:18} {configured}   (sensors/pools.py: {POOL_LIMITS.get(pool, '-')})")
    return 0


def run_ui(args) -> int:
    """`dagster dev` on this project's workspace with the pool limits applied, stopped whole (cli/process_tree.py)."""
    from lumina_assets.cli.process_tree import run_until_stopped

    if not Path(args.workspace).is_file():
        return fail(f"No {args.workspace} here: run `make ui` from the project folder.")
    from lumina_assets.cli.serve import unavailable_address

    unavailable = unavailable_address(args.host, args.port)
    if unavailable:
        return fail(
            f"Cannot open the UI on {args.host}:{args.port}: {unavailable} (make ui: LUMINA_UI_PORT)."
        )
    # in a child process, so that this supervisor never loads Dagster: its own exit then takes a moment, not seconds
    applied = subprocess.run([sys.executable, "-m", "lumina_assets.cli.main", "pools", "apply"], check=False)
    if applied.returncode:
        return applied.returncode
    dagster = Path(sys.executable).with_name("dagster")
    command = [str(dagster), "dev", "-h", args.host, "-p", str(args.port), "-w", args.workspace]
    print(
        f"Dagster UI on http://{args.host}:{args.port}/  (Ctrl-C stops it and every process it started)",
        flush=True,
    )
    # SIGINT sent to `dagster dev` itself closes the web port first: the rest is then stopped within the grace
    local = "127.0.0.1" if args.host in ("0.0.0.0", "", "::") else args.host
    return run_until_stopped(command, grace_seconds=args.grace, serving=lambda: _accepts(local, args.port))


def _accepts(host: str, port: int) -> bool:
    import socket

    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def add_commands(commands, bench_commands) -> None:
    ui = commands.add_parser(
        "ui", help="the Dagster UI (`dagster dev`) on this project; Ctrl-C stops all of it"
    )
    ui.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--workspace", default="workspace.yaml")
    ui.add_argument(
        "--grace",
        type=float,
        default=5.0,
        help="seconds dagster's processes get to shut down cleanly before they are killed (default 5)",
    )
    ui.set_defaults(handler=run_ui)

    pools = commands.add_parser("pools", help="per-pool concurrency limits for the external APIs")
    pools.add_argument(
        "action", choices=["apply", "show"], help="apply sensors/pools.py limits, or show them"
    )
    pools.set_defaults(handler=run_pools)
