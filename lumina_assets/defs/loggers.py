"""The `lumina_terminal` logger: the assets' INFO and WARNING lines, printed under the step `lumina demo` runs."""

from __future__ import annotations

import logging
import sys

import dagster as dg

TERMINAL_LOGGER = "lumina_terminal"


class _TerminalHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        step = meta.get("step_key")
        if not step or record.levelno >= logging.ERROR:  # engine events; failures are reported by the runner
            return
        message = str(meta.get("orig_message") or record.getMessage()).splitlines()[0][:200]
        print(f"           {step}: {message}", file=sys.stdout, flush=True)


@dg.logger(description="Asset messages at INFO and up, one short line each, for the `lumina demo` terminal.")
def terminal_logger(init_context: dg.InitLoggerContext) -> logging.Logger:
    log = logging.Logger(TERMINAL_LOGGER, level=logging.INFO)
    log.addHandler(_TerminalHandler())
    return log


LOGGERS = {"console": dg.colored_console_logger, TERMINAL_LOGGER: terminal_logger}
