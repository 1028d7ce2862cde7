"""The saved-search API (`/api/alerts`, `/feeds/<name>.xml`) and `lumina alerts`: the contract the page builds on,
every bad input a 4xx with a message, the server's host and origin checks in force."""

from __future__ import annotations

import json

import feedparser
import pytest
from starlette.testclient import TestClient

from lumina_assets.cli.main import main
from lumina_assets.search import saved_searches
from lumina_assets.search.api import create_app
from lumina_assets.search.http_json import MAX_BODY_BYTES

BASE = "http://127.0.0.1:8765"


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(service=None), base_url=BASE)  # the alert routes never search


def post(client, path, body, **headers):
    return client.post(
        path, content=json.dumps(body), headers={"content-type": "application/json", **headers}
    )


def test_save_list_seen_delete_round_trip(client):
    response = post(
        client,
        "/api/alerts",
        {"name": "gnn", "query": "graph neural networks", "filters": {"year_min": 2020}, "k": 5},
    )
    assert response.status_code == 201
    assert response.json()["name"] == "gnn"
    assert client.get("/api/alerts").json() == [
        {
            "name": "gnn",
            "query": "graph neural networks",
            "filters": {"year_min": 2020},
            "k": 5,
            "new_count": 0,
            "feed_url": "/feeds/gnn.xml",
        }
    ]
    assert client.post("/api/alerts/gnn/seen").status_code == 204
    feed = feedparser.parse(client.get("/feeds/gnn.xml").content)
    assert not feed.bozo and feed.version == "atom10" and feed.entries == []
    assert feed.feed.title == "Lumina alert: gnn"
    assert client.delete("/api/alerts/gnn").status_code == 204
    assert client.get("/api/alerts").json() == []
    assert client.delete("/api/alerts/gnn").status_code == 404


def test_a_name_is_made_from_the_query_when_none_is_given(client):
    response = post(client, "/api/alerts", {"query": "Sepsis in newborns, 2020!"})
    assert response.status_code == 201 and response.json()["name"] == "sepsis-in-newborns-2020"


def test_duplicate_name_is_409(client):
    assert post(client, "/api/alerts", {"name": "a", "query": "x y"}).status_code == 201
    response = post(client, "/api/alerts", {"name": "a", "query": "other"})
    assert response.status_code == 409 and "exists" in response.json()["error"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "a b", "query": "q"}, "name must be"),
        ({"name": "../etc", "query": "q"}, "name must be"),
        ({"name": "ok"}, "query"),
        ({"name": "ok", "query": ""}, "query is empty"),
        ({"name": "ok", "query": "q", "k": "5"}, "k must be an integer"),
        ({"name": "ok", "query": "q", "k": 0}, "k must be between"),
        ({"name": "ok", "query": "q", "k": True}, "k must be an integer"),
        ({"name": "ok", "query": "q", "filters": ["tag"]}, "filters must be an object"),
        ({"name": "ok", "query": "q", "filters": {"colour": "red"}}, "unknown filter"),
        ({"name": "ok", "query": "q", "filters": {"year_min": "2020"}}, "year_min must be an integer"),
        ({"name": "ok", "query": "q", "extra": 1}, "unknown field"),
        (["not", "an", "object"], "JSON object"),
    ],
)
def test_bad_input_is_400_with_a_message(client, body, message):
    response = post(client, "/api/alerts", body)
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert client.get("/api/alerts").json() == []


def test_body_rules_are_the_search_apis(client):
    assert (
        client.post(
            "/api/alerts", content=b'{"query":"q"}', headers={"content-type": "text/plain"}
        ).status_code
        == 415
    )
    big = json.dumps({"name": "big", "query": "q", "filters": {"author": "x" * MAX_BODY_BYTES}})
    assert (
        client.post("/api/alerts", content=big, headers={"content-type": "application/json"}).status_code
        == 413
    )
    surrogate = b'{"name": "s", "query": "\\ud800"}'
    response = client.post("/api/alerts", content=surrogate, headers={"content-type": "application/json"})
    assert response.status_code == 400 and "surrogate" in response.json()["error"]


def test_cross_origin_and_foreign_hosts_are_refused(client):
    assert (
        post(client, "/api/alerts", {"name": "a", "query": "q"}, origin="http://evil.example").status_code
        == 403
    )
    assert post(client, "/api/alerts", {"name": "a", "query": "q"}, origin=BASE).status_code == 201
    assert client.get("/api/alerts", headers={"host": "rebound.example"}).status_code == 400
    assert client.delete("/api/alerts/a", headers={"origin": "http://evil.example"}).status_code == 403
    assert client.get("/api/alerts").json()[0]["name"] == "a"


def test_unknown_names_are_404(client):
    assert client.post("/api/alerts/nope/seen").status_code == 404
    assert client.delete("/api/alerts/nope").status_code == 404
    assert client.get("/feeds/nope.xml").status_code == 404
    assert client.get("/feeds/..%2Fsaved_searches.xml").status_code == 404


def test_removed_then_saved_again_starts_afresh():
    first = saved_searches.add(saved_searches.validate("again", "sepsis", {}, 10))
    with saved_searches.updating_hits() as state:
        state["hits"].append(
            {"search_id": first.id, "search": "again", "paper_id": "p1", "found_at": saved_searches.now()}
        )
    assert [s["new_count"] for s in saved_searches.summaries()] == [1]
    saved_searches.remove("again")
    second = saved_searches.add(saved_searches.validate("again", "sepsis", {}, 10))
    assert second.id != first.id and saved_searches.hits_for(second) == []


def test_cli_add_list_remove(capsys):
    assert (
        main(["alerts", "add", "graph neural networks", "--filters", "year_min=2020", "venue=ACL", "-k", "5"])
        == 0
    )
    assert main(["alerts", "add", "graph neural networks"]) == 1  # same default name
    assert main(["alerts", "add", "q", "--filters", "colour=red"]) == 2
    assert main(["alerts", "add", "q", "--filters", "year_min=recent"]) == 2
    assert main(["alerts", "add", "q", "-k", "99"]) == 2
    capsys.readouterr()
    assert main(["alerts", "list"]) == 0
    listed = capsys.readouterr().out
    assert (
        "graph-neural-networks" in listed
        and "k=5" in listed
        and "year_min=2020" in listed
        and "new=0" in listed
    )
    [search] = saved_searches.load()
    assert search.filters == {"year_min": 2020, "venue": "ACL"}
    assert main(["alerts", "remove", "graph-neural-networks"]) == 0
    assert main(["alerts", "remove", "graph-neural-networks"]) == 1
    assert saved_searches.load() == []


def test_library_tag_and_collection_are_saved_filters(client):
    body = {"name": "reading", "query": "graphs", "filters": {"tag": "to-read", "collection": "Thesis/Ch 2"}}
    assert post(client, "/api/alerts", body).status_code == 201
    [search] = saved_searches.load()
    assert search.request().engine_query() == 'graphs tag:"to-read" collection:"Thesis/Ch 2"'
    response = post(client, "/api/alerts", {"name": "bad", "query": "q", "filters": {"tag": 'a"b'}})
    assert response.status_code == 400 and "tag" in response.json()["error"]
