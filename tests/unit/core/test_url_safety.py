"""Where the HTTP layer may go, round two: the address policy on every client and every redirect hop (API calls
too, not only PDF downloads), IPv4-embedded IPv6 forms judged by the IPv4 address inside, the connection made to
the address that was checked (no second DNS answer), and credentials in a redirect's query string kept from
another origin. Local servers on 127.0.0.1 stand in for the hosts; a fake resolver gives them their names."""

from __future__ import annotations

import ipaddress

import hostile
import httpx
import pytest

from lumina_assets.core.http import HttpClient, HttpError, UrlPolicy
from lumina_assets.core.url_safety import PIN_EXTENSION, PinnedTransport, secret_values, without_secrets
from resources.openalex import OpenAlexResource
from resources.providers import SemanticScholarResource, SerpApiScholarResource


@pytest.fixture
def server(tmp_path):
    with hostile.hostile_server(tmp_path) as running:
        yield running


@pytest.fixture
def other_server(tmp_path):
    with hostile.hostile_server(tmp_path) as running:
        yield running


def _resolves_to(*addresses: str, calls: list | None = None):
    answers = iter(addresses) if len(addresses) > 1 else None

    def resolve(host, port, **kwargs):
        if calls is not None:
            calls.append(host)
        address = next(answers) if answers else addresses[0]
        return [(0, 0, 0, "", (address, port))]

    return resolve


class LoopbackIsPublic(UrlPolicy):
    """The real policy, except that 127.0.0.1 counts as public: the local test server plays an Internet host
    whose name the fake resolver answers, so the connection can be watched."""

    def refusal(self, address):
        return None if str(address) == "127.0.0.1" else super().refusal(address)


# ---------------------------------------------------------------- the policy on every client


def test_every_client_refuses_private_addresses_unless_opted_in(server, monkeypatch):
    """Before: only the PDF downloader had a policy; an API client went anywhere, loopback included."""
    monkeypatch.delenv("LUMINA_ALLOW_PRIVATE_URLS")
    clients = {
        "plain": HttpClient(max_retries=0),
        "openalex": OpenAlexResource(base_url=server.url, cache_responses=False).http_client(),
        "semantic scholar": SemanticScholarResource(base_url=server.url, cache_responses=False).http_client(),
    }
    for name, client in clients.items():
        with pytest.raises(HttpError) as info:
            client.get_json(f"{server.url}/echo/{name}")
        assert info.value.reason == "blocked_url" and "LUMINA_ALLOW_PRIVATE_URLS" in str(info.value), name
    assert server.requests() == []
    monkeypatch.setenv("LUMINA_ALLOW_PRIVATE_URLS", "1")  # the one opt-in, read at each request
    assert clients["openalex"].get_json(f"{server.url}/echo/opted-in")["path"] == "/echo/opted-in"


def test_an_api_redirect_to_the_metadata_address_is_refused_at_the_hop(monkeypatch):
    """Before: an API call (not a PDF URL) followed a redirect to 169.254.169.254 or any private address."""
    monkeypatch.delenv("LUMINA_ALLOW_PRIVATE_URLS")
    for target in (
        "http://169.254.169.254/latest/meta-data/iam",
        "http://10.0.0.5/admin",
        "http://[::ffff:169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
        "http://metadata.internal.example/",
    ):
        seen = []

        def handler(request, target=target, seen=seen):
            seen.append(request.url.host)
            return httpx.Response(302, headers={"Location": target})

        resolver = _resolves_to("93.184.216.34")
        if "internal" in target:

            def resolver(host, port, **kw):
                address = "169.254.169.254" if "internal" in host else "93.184.216.34"
                return [(0, 0, 0, "", (address, port))]

        client = OpenAlexResource(base_url="https://api.openalex.example", cache_responses=False).http_client(
            httpx.MockTransport(handler)
        )
        client.url_policy = UrlPolicy(resolver=resolver)  # the resource's own policy, with a fake DNS
        with pytest.raises(HttpError) as info:
            client.get_json("/works/W1")
        assert info.value.reason == "blocked_url", target
        assert seen == ["api.openalex.example"], target  # the inner address was never asked


# ---------------------------------------------------------------- IPv4-embedded IPv6


@pytest.mark.parametrize(
    "address, embeds",
    [
        ("64:ff9b::7f00:1", "127.0.0.1"),  # NAT64
        ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
        ("64:ff9b::a00:5", "10.0.0.5"),
        ("64:ff9b:1::c0a8:1", "192.168.0.1"),  # local-use NAT64
        ("::7f00:1", "127.0.0.1"),  # IPv4-compatible ::a.b.c.d
        ("::a9fe:a9fe", "169.254.169.254"),
        ("2002:7f00:1::1", "127.0.0.1"),  # 6to4
        ("2002:a9fe:a9fe::", "169.254.169.254"),
        ("2002:c0a8:101::1", "192.168.1.1"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45"),  # Teredo (client obfuscated)
        ("::ffff:127.0.0.1", "127.0.0.1"),
    ],
)
def test_ipv4_embedded_ipv6_is_judged_by_the_ipv4_inside(address, embeds):
    """Before: 64:ff9b::/96, ::a.b.c.d and 2002::/16 counted as public whatever they embedded."""
    policy = UrlPolicy(allow_private=False)
    with pytest.raises(HttpError) as literal:
        policy.check(f"http://[{address}]/x")
    assert literal.value.reason == "blocked_url"
    named = UrlPolicy(allow_private=False, resolver=_resolves_to(address))
    with pytest.raises(HttpError) as resolved:
        named.check("https://innocent.example/x")
    assert resolved.value.reason == "blocked_url"
    if embeds != str(ipaddress.ip_address(address)):
        assert embeds in str(resolved.value)


@pytest.mark.parametrize(
    "address", ["64:ff9b::808:808", "2002:808:808::1", "2001:4860:4860::8888", "8.8.8.8"]
)
def test_public_addresses_pass_in_every_form(address):
    """A DNS64 resolver on an IPv6-only network answers 64:ff9b::a.b.c.d for a public host: that stays allowed."""
    assert (
        UrlPolicy(allow_private=False, resolver=_resolves_to(address)).check("https://pub.example/x")
        == address
    )


# ---------------------------------------------------------------- the checked address is the one connected to


def test_the_connection_goes_to_the_checked_address_dns_rebinding(server):
    """Before: the policy resolved the name, then httpx resolved it again to connect, so a DNS answer that
    changed in between (rebinding: public for the check, inner for the connection) was used unchecked. Here the
    first answer is the (allowed) test server and any later one an inner address: the request must reach the
    server, named by its Host header, after one resolution per hop."""
    calls = []
    policy = LoopbackIsPublic(
        allow_private=False, resolver=_resolves_to("127.0.0.1", "10.0.0.1", calls=calls)
    )
    client = HttpClient(url_policy=policy, max_retries=0)
    url = f"http://api.rebind.example:{server.port}/echo/pinned"
    echoed = client.get_json(url)
    assert echoed["path"] == "/echo/pinned"
    assert echoed["headers"]["host"] == f"api.rebind.example:{server.port}"
    assert calls == ["api.rebind.example"]
    with pytest.raises(HttpError) as info:  # the next hop's answer is the inner one: refused, not connected
        client.get_json(url)
    assert info.value.reason == "blocked_url" and len(server.requests()) == 1


def test_https_is_pinned_with_the_name_as_sni(monkeypatch):
    sent = []

    def capture(self, request):
        sent.append(request)
        return httpx.Response(200, json={"ok": True})

    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", capture)
    transport = PinnedTransport()
    with httpx.Client(transport=transport) as client:
        client.get("https://api.example.org:8443/x?y=1", extensions={PIN_EXTENSION: "2001:db8::7"})
        client.get("https://other.example.org/x")  # no pin: sent unchanged
    pinned, unpinned = sent
    assert str(pinned.url) == "https://[2001:db8::7]:8443/x?y=1"
    assert pinned.headers["host"] == "api.example.org:8443"
    assert pinned.extensions["sni_hostname"] == "api.example.org"
    assert PIN_EXTENSION not in pinned.extensions
    assert unpinned.url.host == "other.example.org" and "sni_hostname" not in unpinned.extensions


# ---------------------------------------------------------------- credentials in a redirect's query string


def test_query_credentials_never_reach_another_origin_through_a_location(server, other_server):
    """Before: a cross-origin redirect whose Location repeated the query string carried SerpAPI's `api_key` and
    OpenAlex's `api_key` and `mailto` to the other origin."""
    landing = f"{other_server.url}/echo/landed"
    serp = SerpApiScholarResource(api_key="serp-secret-key", base_url=server.url, cache_responses=False)
    serp_client = serp.get_client()
    repeat = f"{landing}?engine=google_scholar&q=cells&api_key=serp-secret-key"
    serp_client.http.get_json("/redirect", params={"to": repeat, "api_key": "serp-secret-key"})
    openalex = OpenAlexResource(
        api_key="oa-secret-key", mailto="me@lab.example", base_url=server.url, cache_responses=False
    ).client()
    openalex.http.get_json(
        "/redirect",
        params={
            "to": f"{landing}?filter=doi:10.1/x&api_key=oa-secret-key&mailto=me@lab.example&copy=oa-secret-key",
            "api_key": "oa-secret-key",
            "mailto": "me@lab.example",
        },
    )
    landed = other_server.requests()
    assert len(landed) == 2
    for request in landed:
        assert "secret" not in request["path"] and "me@lab.example" not in request["path"], request["path"]
    assert "engine=google_scholar" in landed[0]["path"] and "q=cells" in landed[0]["path"]
    assert "filter=doi" in landed[1]["path"]


def test_same_origin_redirects_keep_their_query(server):
    client = HttpClient(base_url=server.url)
    echoed = client.get_json(
        "/redirect", params={"to": f"{server.url}/echo/same?api_key=kept", "api_key": "kept"}
    )
    assert "api_key=kept" in echoed["path"]


def test_secret_values_and_without_secrets():
    sent = secret_values(
        "https://a.example/?api_key=abcd1234&lang=en",
        {"mailto": "me@lab.example", "q": "cells"},
        {"Authorization": "Bearer tok-123456", "Accept": "application/json", "User-Agent": "lumina"},
    )
    assert sent == {"abcd1234", "me@lab.example", "Bearer tok-123456", "tok-123456"}
    assert without_secrets("https://b.example/p?a=1&api_key=k&MAILTO=x&token=t") == "https://b.example/p?a=1"
    assert (
        without_secrets("https://b.example/p?a=1&copy=sk-123456", {"sk-123456"}) == "https://b.example/p?a=1"
    )
    assert without_secrets("https://b.example/p") == "https://b.example/p"
