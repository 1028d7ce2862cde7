"""docs/configuration.md's variable tables, generated from the settings object so the page cannot drift from it.

`render()` is the page with the part between the markers regenerated (the hand-written rest kept);
`python -m devtools.settings_docs` writes it; a test fails when the file differs from `render()`."""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

from lumina_assets.core import settings

PAGE = settings.PROJECT_ROOT / "docs" / "configuration.md"
START = "<!-- generated from lumina_assets/core/settings.py: python -m devtools.settings_docs -->"
END = "<!-- end of generated part -->"

# Secrets and variables other libraries read: documented with the settings, never parsed or returned here.
SECRETS = {
    "OPENALEX_API_KEY": "OpenAlex key (required by OpenAlex since Feb 2026); without it the OpenAlex crawl is "
    "skipped and says so",
    "OPENAI_API_KEY": "judge (gpt-4o by default); without a key nothing is judged (CR / CP not measured) and every "
    "report says so",
    "ANTHROPIC_API_KEY": "synthetic question generation (Claude Sonnet); offline generator otherwise, labelled",
    "OPENAI_COMPATIBLE_API_KEY": "the openai-compatible backend's key",
    "SEMANTIC_SCHOLAR_API_KEY, SERPAPI_API_KEY, EXA_API_KEY": "benchmark providers; a provider without its key is "
    "skipped with a message, never faked",
    "DAGSTER_PG_PASSWORD": "the PostgreSQL password of the production `dagster.yaml`",
}
READ_ELSEWHERE = {
    "OPENAI_BASE_URL, OPENAI_COMPATIBLE_BASE_URL": "an OpenAI-compatible server (vLLM, Ollama, llama.cpp); "
    "either switches the judge to `openai-compatible` (read through `dagster.EnvVar`)",
    "ANTHROPIC_BASE_URL": "the anthropic backend's endpoint (a gateway or proxy path), read by the anthropic SDK",
    "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP": "credentials and "
    "endpoint of an `s3://` LanceDB URI, read by LanceDB itself "
    "([production](production.md#lancedb-on-object-storage))",
    "HTTPS_PROXY, HTTP_PROXY, NO_PROXY": "honoured by every API call and by the demo's offline check (httpx)",
    "DAGSTER_PG_HOST, DAGSTER_PG_PORT, DAGSTER_PG_USER": "the PostgreSQL server of the production `dagster.yaml` "
    "([production](production.md#dagster-instance-on-postgresql))",
}


def _type(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type(a) for a in args if a is not type(None))
    if origin is list:
        return f"comma-separated {_type(args[0])}"
    return {bool: "switch", int: "integer", str: "text", Path: "path"}.get(annotation, str(annotation))


def _default(value: Any) -> str:
    if value is None or value == "" or value == []:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, Path):
        try:
            return f"`./{value.relative_to(settings.PROJECT_ROOT)}`"
        except ValueError:
            return f"`{value}`"
    return f"`{value}`"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("\n", " ") for cell in cells) + " |"


def tables() -> str:
    """The generated part: one table per settings group, then secrets and variables other libraries read."""
    lines = [START, ""]
    for name, group in settings.GROUPS.items():
        lines += [f"### {name}", "", (group.__doc__ or "").strip(), ""]
        lines += [_row(["variable", "type", "default", "what it does"]), _row(["---"] * 4)]
        for field in group.model_fields.values():
            if field.validation_alias is None:
                continue  # derived, not read from a variable
            variable = settings.variable(field)
            lines.append(
                _row(
                    [
                        f"`{variable}`",
                        _type(field.annotation),
                        _default(field.default),
                        field.description or "",
                    ]
                )
            )
        lines.append("")
    lines += ["### secrets", "", "Read only through `dagster.EnvVar`, never parsed, logged or cached.", ""]
    lines += [_row(["variable", "what it is for"]), _row(["---"] * 2)]
    lines += [_row([", ".join(f"`{n}`" for n in k.split(", ")), v]) for k, v in SECRETS.items()]
    lines += ["", "### read by libraries", ""]
    lines += [_row(["variable", "what it does"]), _row(["---"] * 2)]
    lines += [_row([", ".join(f"`{n}`" for n in k.split(", ")), v]) for k, v in READ_ELSEWHERE.items()]
    return "\n".join([*lines, "", END])


def render(page: str | None = None) -> str:
    """`page` (default: the file) with its generated part replaced."""
    text = PAGE.read_text(encoding="utf-8") if page is None else page
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise ValueError(f"{PAGE.name} lacks the markers {START!r} ... {END!r}")
    return head + tables() + tail


def main() -> int:
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
