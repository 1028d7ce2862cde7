"""Hostile inputs built inside the tests (never downloaded): a decompression-bomb PDF, a PDF whose /Title is
broken UTF-16, and a local HTTP server that redirects, echoes headers, trickles and floods; plus module-level
functions the sandbox tests run in a child process (the child imports them from here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from orchestration_servers import FAKE_SERVER_GRACE_S, free_port, stop_process_group

# ---------------------------------------------------------------- PDFs


def raw_pdf(content: bytes, *, title_hex: str | None = None, flate: bool = True) -> bytes:
    """A one-page PDF whose page content stream is `content` (FlateDecoded when `flate`), with an optional
    /Title given as hex of UTF-16BE bytes; objects, xref and trailer written by hand."""
    stream = zlib.compress(content, 9) if flate else content
    filters = b" /Filter /FlateDecode" if flate else b""
    info = b"<< /Title <%s> /Author (Hostile Tester) >>" % title_hex.encode() if title_hex else b"<< >>"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d%s >>\nstream\n" % (len(stream), filters) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        info,
    ]
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def text_page(lines: list[str]) -> bytes:
    """A content stream drawing `lines` of text down the page."""
    ops = [b"BT /F1 18 Tf 72 720 Td"]
    for number, line in enumerate(lines):
        size = b"24" if number == 0 else b"11"
        ops.append(b"/F1 %s Tf (%s) Tj 0 -28 Td" % (size, line.encode("latin-1")))
    ops.append(b"ET")
    return b"\n".join(ops)


def bomb_pdf(decoded_mb: int) -> bytes:
    """A one-page PDF whose content stream inflates to `decoded_mb` MB of text operators (~3 KB per MB
    compressed): what took `lumina parse` to 11 GB in the issue, scaled down."""
    unit = b"BT /F1 12 Tf 72 720 Td (Hello hostile world) Tj ET\n"
    block = unit * (1_000_000 // len(unit))
    compressor = zlib.compressobj(9)
    stream = b"".join(compressor.compress(block) for _ in range(decoded_mb)) + compressor.flush()
    # raw_pdf would compress again; hand it the compressed stream as an unfiltered body and patch the filter
    pdf = raw_pdf(stream, flate=False)
    return pdf.replace(
        b"<< /Length %d >>" % len(stream), b"<< /Length %d /Filter /FlateDecode >>" % len(stream)
    )


def fix_xref(pdf: bytes) -> bytes:
    """Rewrite the xref offsets after an edit changed object lengths (MuPDF would repair, quietly)."""
    import re

    head, _, _ = pdf.partition(b"xref\n")
    offsets = [m.start() for m in re.finditer(rb"(?m)^\d+ 0 obj\n", head)]
    table = b"xref\n0 %d\n0000000000 65535 f \n" % (len(offsets) + 1)
    table += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    trailer = b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(offsets) + 1,
        len(head),
    )
    return head + table + trailer


def surrogate_title_pdf() -> bytes:
    """A readable one-page paper whose /Title is UTF-16BE ending in an unpaired high surrogate (D800): PyMuPDF
    hands it over as a str with lone surrogates."""
    title = "FEFF" + "Broken Title Field".encode("utf-16-be").hex() + "D800"
    body = text_page(
        [
            "Surrogates in the Title Field of a PDF",
            "Abstract",
            "We study what happens when a PDF names itself in broken UTF-16 and the pipeline reads it.",
            "The metadata must come out as valid UTF-8 and the paper must still be indexed by its text.",
        ]
    )
    return fix_xref(raw_pdf(body, title_hex=title))


# ---------------------------------------------------------------- sandbox targets (run in a child process)


def sleep_forever() -> None:
    time.sleep(3600)


def allocate_mb(megabytes: int) -> int:
    block = bytearray(megabytes * 1024 * 1024)
    return len(block)


def die_by_signal() -> None:
    os.kill(os.getpid(), 9)


def answer(value):
    return {"value": value, "pid": os.getpid()}


# ---------------------------------------------------------------- a hostile HTTP server

SERVER_SOURCE = r"""
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        with open(sys.argv[2], "a") as log:
            log.write(json.dumps({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}) + "\n")

    def _send(self, status, body=b"", headers=()):
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.do_GET()

    def do_GET(self):
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path.startswith("/redirect"):
            self._send(int(query.get("status", 302)), headers=[("Location", query["to"])])
        elif url.path.startswith("/echo"):
            body = json.dumps({"headers": {k.lower(): v for k, v in self.headers.items()}, "path": self.path}).encode()
            self._send(200, body, [("Content-Type", "application/json")])
        elif url.path == "/trickle":
            self.send_response(200)
            self.send_header("Content-Type", "application/pdf")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                self.wfile.write(b"%PDF-1.7\n")
                for _ in range(10000):
                    time.sleep(float(query.get("every", 0.3)))
                    self.wfile.write(b" ")
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif url.path == "/flood":
            self.send_response(200)
            self.send_header("Content-Type", "application/pdf")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"%PDF-1.7\n" + b"0" * (1 << 20)
            try:
                for _ in range(int(query.get("mb", 600))):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif url.path == "/pdf":
            with open(query["file"], "rb") as handle:
                self._send(200, handle.read(), [("Content-Type", "application/pdf")])
        else:
            self._send(404, b"no such route")

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


@dataclass
class HostileServer:
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


@contextmanager
def hostile_server(folder: Path) -> Iterator[HostileServer]:
    """The server above on a free 127.0.0.1 port, in its own session, stopped by PID."""
    import httpx

    port = free_port()
    script = folder / f"hostile_server_{port}.py"
    script.write_text(SERVER_SOURCE)
    log = folder / f"hostile_server_{port}.log"
    process = subprocess.Popen(
        [sys.executable, str(script), str(port), str(log)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/ready", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the hostile test server did not start") from None
                time.sleep(0.05)
        log.unlink(missing_ok=True)  # the readiness probe is not part of any test
        yield HostileServer(port, log)
    finally:
        stop_process_group(process, timeout=FAKE_SERVER_GRACE_S)
