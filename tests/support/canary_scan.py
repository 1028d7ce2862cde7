"""The canary scans' shared parts: a unique canary per secret variable, the places a secret could leak into (files,
Dagster's event log and metadata, a PostgreSQL database, an S3 bucket) as text, the search for canaries in them,
and a fake LLM API (Anthropic Messages / OpenAI chat completions) that answers every prompt Lumina sends and keeps
each request."""

from __future__ import annotations

import gzip
import json
import re
import uuid
from pathlib import Path

import dagster as dg
import httpx2
import polars as pl
from fake_llm import anthropic_message_response, openai_chat_response
from secret_names import secret_variables


def canaries_for_every_secret() -> dict[str, str]:
    return {
        name: f"canary-{name.lower().replace('_', '-')}-{uuid.uuid4().hex}" for name in secret_variables()
    }


def request_text(request) -> str:
    headers = "\n".join(f"{k}: {v}" for k, v in request.headers.items())
    return f"{request.method} {request.url}\n{headers}\n{request.content.decode('utf-8', 'replace')}"


def file_texts(root: Path) -> dict[str, str]:
    """Every file under `root` as text: parquet by its values, gzip decompressed, anything else as bytes."""
    found = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        if path.suffix == ".parquet":
            text = json.dumps(pl.read_parquet(path).to_dicts(), default=str)
        elif raw[:2] == b"\x1f\x8b":
            text = gzip.decompress(raw).decode("utf-8", "replace")
        else:
            text = raw.decode("utf-8", "replace")
        found[str(path)] = text
    return found


def run_texts(instance: dg.DagsterInstance, results) -> dict[str, str]:
    """The event log of every run (serialized as stored) and every materialization's and check's metadata."""
    found = {}
    for result in results:
        events = instance.all_logs(result.run_id)
        found[f"event log {result.run_id}"] = "\n".join(dg.serialize_value(event) for event in events)
        for event in result.get_asset_materialization_events():
            materialization = event.step_materialization_data.materialization
            found[f"metadata {materialization.asset_key.to_user_string()}"] = repr(
                {k: v.value for k, v in materialization.metadata.items()}
            )
        for event in result.get_asset_check_evaluations():
            found[f"check {event.check_name}"] = repr({k: v.value for k, v in event.metadata.items()})
    return found


def postgres_texts(server, password: str) -> dict[str, str]:
    """Every row of every table of the server's database, as text (runs, event logs, instigator state ...)."""
    import psycopg2

    found = {}
    connection = psycopg2.connect(
        host=server.host, port=server.port, user=server.username, dbname=server.db_name, password=password
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            for (table,) in cursor.fetchall():
                cursor.execute(f'SELECT * FROM "{table}"')
                found[f"postgres table {table}"] = "\n".join(repr(row) for row in cursor.fetchall())
    finally:
        connection.close()
    return found


def bucket_texts(s3, bucket: str) -> dict[str, str]:
    """Every object in the bucket as raw text."""
    client = s3.client()
    found = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            found[f"s3://{bucket}/{item['Key']}"] = body.decode("utf-8", "replace")
    return found


def leaks(canaries: dict[str, str], places: dict[str, str]) -> list[str]:
    return [
        f"{name} in {where}"
        for name, canary in canaries.items()
        for where, text in places.items()
        if canary in text
    ]


def answer(prompt: str) -> str:
    """What each of Lumina's prompts expects back: the benchmark's (question, refined query, relevance, critical
    sentences) and search's (query parse, expansion, rerank, overview)."""
    if "Sentences: " in prompt:
        count = len(re.findall(r"(?:^|\s)(\d+)\. ", prompt.split("Sentences: ", 1)[1]))
        return " ".join(f"{i}. <{'critical' if i == 1 else 'not_critical'}>" for i in range(1, count + 1))
    if "absolutely essential and irreplaceable" in prompt:
        return "<highly_relevant>" if "vitamin" in prompt.lower() else "<not_relevant>"
    if "suggest a refined search query" in prompt:
        return "<query>refined mechanism evidence</query>"
    if "separate its constraints from its topic" in prompt:
        request = prompt.rsplit("Request:", 1)[1].strip()
        return json.dumps(
            {
                "text": request,
                "authors": [],
                "year_min": None,
                "year_max": None,
                "keywords": request.split()[:3],
            }
        )
    if "different search queries" in prompt:
        return "vitamin D deficiency outcomes\nserum 25-hydroxyvitamin D levels and risk"
    if "Rate how well each numbered passage" in prompt:
        numbers = re.findall(r"^\[?(\d+)[\].:)]", prompt.split("Request:", 1)[1], re.M)
        return json.dumps({n: 3 if i == 0 else 1 for i, n in enumerate(dict.fromkeys(numbers))} or {"1": 3})
    if "short overview" in prompt:
        return "The returned passages report measured associations with the outcome [1]."
    return "<question>Which biomarkers predict the outcome?</question>"


class LLMApi:
    """One LLM origin: answers Anthropic Messages or OpenAI chat completions and keeps every request."""

    def __init__(self):
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        body = json.loads(request.content)
        prompt = body["messages"][-1]["content"]
        prompt = prompt if isinstance(prompt, str) else " ".join(part.get("text", "") for part in prompt)
        if request.url.path.endswith("/messages"):
            return anthropic_message_response(answer(prompt), model=body["model"])
        return openai_chat_response(answer(prompt), model=body["model"])

    def prompts(self) -> list[str]:
        found = []
        for request in self.requests:
            content = json.loads(request.content)["messages"][-1]["content"]
            found.append(
                content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
            )
        return found
