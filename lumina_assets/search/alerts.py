"""Alerts: which papers newly entered a saved search's top k after the index changed (each hit with the ingest batch
and the index run that brought it), and the Atom feed of them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from urllib.parse import quote, urlencode, urlsplit
from xml.etree import ElementTree as ET

from lumina_assets.core.hygiene import xml_safe
from lumina_assets.core.schemas import Context
from lumina_assets.search.saved_searches import SavedSearch

ATOM = "http://www.w3.org/2005/Atom"
SNIPPET_CHARS = 400


def _instant(stamp: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp) if stamp else None
    except ValueError:
        return None


def evaluate(
    search: SavedSearch,
    contexts: Sequence[Context],
    state: dict,
    catalogue: dict[str, dict],
    *,
    found_at: str,
    index_run: str,
) -> list[dict]:
    """The hits of one search for this index version, also recorded in `state`; papers catalogued before the search
    was saved count as shown. `catalogue`: paper id -> {"first_seen", "ingest_batch"}."""
    entry = state["searches"].get(search.id)
    top = [c for c in contexts if c.paper_id]
    if entry is None:
        saved = _instant(search.created_at)
        known = set()
        for context in top:
            joined = _instant((catalogue.get(context.paper_id) or {}).get("first_seen"))
            if joined is None or saved is None or joined <= saved:
                known.add(context.paper_id)
    else:
        known = set(entry["known"])
    hits = []
    for rank, context in enumerate(top, start=1):
        if context.paper_id in known:
            continue
        paper = catalogue.get(context.paper_id) or {}
        hits.append(
            {
                "search_id": search.id,
                "search": search.name,
                "paper_id": context.paper_id,
                "title": context.title,
                "doi": context.doi,
                "url": context.url,
                "snippet": (context.chunks[0] if context.chunks else "")[:SNIPPET_CHARS],
                "score": round(float(context.score), 6),
                "rank": rank,
                "ingest_batch": paper.get("ingest_batch"),
                "index_run": index_run,
                "found_at": found_at,
            }
        )
    known |= {c.paper_id for c in top}
    state["searches"][search.id] = {"known": sorted(known), "name": search.name, "evaluated_at": found_at}
    state["hits"].extend(hits)
    return hits


def _text(parent: ET.Element, tag: str, text: str, **attributes: str) -> ET.Element:
    """An element whose text is made XML-safe: a title holding ESC or U+FFFF must not make the feed invalid."""
    element = ET.SubElement(parent, f"{{{ATOM}}}{tag}", {k: xml_safe(v) for k, v in attributes.items()})
    element.text = xml_safe(text)
    return element


def _link(parent: ET.Element, rel: str, href: str) -> None:
    ET.SubElement(parent, f"{{{ATOM}}}link", {"rel": rel, "href": xml_safe(href)})


def _web_url(url: str | None) -> str | None:
    """A hit's own link only when it is http(s): a library URL may be `javascript:` or `data:` (the results page
    refuses them too)."""
    if not url:
        return None
    return url if urlsplit(url.strip()).scheme.lower() in ("http", "https") else None


def _atom_time(stamp: str | None) -> str:
    instant = _instant(stamp)
    return instant.isoformat(timespec="seconds") if instant else "1970-01-01T00:00:00+00:00"


def atom_feed(search: SavedSearch, hits: Sequence[dict], base_url: str) -> bytes:
    """An Atom 1.0 feed (RFC 4287) of a search's hits, newest first, one entry per hit; `base_url` (the server's own)
    makes its links absolute."""
    base = base_url.rstrip("/")
    ET.register_namespace("", ATOM)
    feed = ET.Element(f"{{{ATOM}}}feed")
    _text(feed, "id", f"urn:lumina:alert:{search.id}")
    _text(feed, "title", f"Lumina alert: {search.name}")
    _text(feed, "subtitle", f"New papers in the top {search.k} for: {search.query}")
    newest = max((h["found_at"] for h in hits), default=search.created_at)
    _text(feed, "updated", _atom_time(newest))
    author = ET.SubElement(feed, f"{{{ATOM}}}author")
    _text(author, "name", "Lumina")
    search_link = f"{base}/?{urlencode({'q': search.query, **search.filters})}"
    _link(feed, "self", f"{base}{search.feed_path()}")
    _link(feed, "alternate", search_link)
    _text(feed, "generator", "Lumina")
    for hit in hits:
        entry = ET.SubElement(feed, f"{{{ATOM}}}entry")
        _text(entry, "id", f"urn:lumina:alert:{search.id}:{quote(hit['paper_id'], safe='')}")
        _text(entry, "title", hit.get("title") or hit["paper_id"])
        _text(entry, "updated", _atom_time(hit["found_at"]))
        href = _web_url(hit.get("url")) or f"{base}/?{urlencode({'q': search.query})}"
        _link(entry, "alternate", href)
        batch = hit.get("ingest_batch") or "unknown batch"
        summary = f"New in the top {search.k} (rank {hit.get('rank')}), from ingest batch {batch}."
        if hit.get("snippet"):
            summary += f" {hit['snippet']}"
        _text(entry, "summary", summary)
        ET.SubElement(entry, f"{{{ATOM}}}category", {"term": xml_safe(batch), "label": "ingest batch"})
    return ET.tostring(feed, encoding="utf-8", xml_declaration=True)
