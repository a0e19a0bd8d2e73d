"""The outbound guard on its own: URL parsing, address kinds, host patterns, and fetches
against the local site (refusals happen before any connection; addresses are pinned)."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator

import pytest

from infra.netaddr import classify
from services.netguard.fetch import Fetcher
from services.netguard.guard import Guard
from services.netguard.hosts import HostPattern, PatternError, parse_patterns
from services.netguard.urls import parse_url
from services.sdk import ToolError
from tests.support.network_flow import canary_listener
from tests.support.web_site import Site, StaticResolver, resolver_table


def code_of(fn, *args, **kwargs) -> str:
    with pytest.raises(ToolError) as err:
        fn(*args, **kwargs)
    return err.value.code


# ------------------------------------------------------------------ URLs


@pytest.mark.parametrize("url", [
    "http://0x7f.1/", "http://0x7f000001/", "http://2130706433/", "http://017700000001/",
    "http://127.1/", "http://0177.0.0.1/", "http://1.2.3.04/", "http://127.0.0.1.5/",
    "http://user@example.com/", "http://user:pw@example.com/", "ftp://example.com/",
    "file:///etc/passwd", "gopher://example.com/", "http://[fe80::1%25eth0]/",
])
def test_odd_forms_are_not_allowed(url: str) -> None:
    assert code_of(parse_url, url) == "url_not_allowed"


@pytest.mark.parametrize("url", [
    "", "http://", "http:///x", "http://a..b/", "http://ex ample.com/", "http://ex.com\\@evil/",
    "http://%31%32%37.0.0.1/", "http://x.com:0/", "http://x.com:65536/", "http://x.com:+80/",
    "http://x.com\x00/", "http://[::1/", "http://[::1]x/", "http://" + "a" * 2050 + ".com/",
])
def test_malformed_urls_are_invalid(url: str) -> None:
    assert code_of(parse_url, url) == "invalid_url"


def test_urls_are_canonical() -> None:
    t = parse_url("HTTPS://Bücher.Example./ä?q=ü#frag")
    assert (t.scheme, t.host, t.port, t.path, t.query) == ("https", "xn--bcher-kva.example", 443, "/%C3%A4", "q=%C3%BC")
    assert t.url == "https://xn--bcher-kva.example/%C3%A4?q=%C3%BC"
    # Full-width digits and dots are mapped (UTS 46) before the numeric check: a literal.
    assert parse_url("http://１２７．０．０．１/").ip == ipaddress.ip_address("127.0.0.1")
    assert parse_url("http://[::ffff:127.0.0.1]:81/").host == "::ffff:7f00:1"
    assert parse_url("http://x.com:80").url == "http://x.com/"
    redirected = parse_url("../b?c=1", base=parse_url("http://x.com:8080/a/d"))
    assert redirected.url == "http://x.com:8080/b?c=1"


# ------------------------------------------------------------------ addresses


@pytest.mark.parametrize(("address", "kind"), [
    ("127.0.0.1", "loopback"), ("127.9.9.9", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.0.1", "private"),
    ("fc00::1", "private"), ("169.254.169.254", "metadata"), ("fd00:ec2::254", "metadata"),
    ("169.254.1.1", "link_local"), ("fe80::1", "link_local"), ("100.64.0.1", "cgnat"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"), ("224.0.0.1", "multicast"),
    ("ff02::1", "multicast"), ("::ffff:127.0.0.1", "ipv4_embedded"),
    ("::ffff:8.8.8.8", "ipv4_embedded"), ("64:ff9b::a00:1", "ipv4_embedded"),
    ("2002:7f00:1::", "ipv4_embedded"), ("240.0.0.1", "reserved"), ("255.255.255.255", "reserved"),
    ("192.0.2.1", "private"), ("8.8.8.8", None), ("2606:4700::1111", None),
])
def test_address_kinds(address: str, kind: str | None) -> None:
    assert classify(ipaddress.ip_address(address)) == kind


# ------------------------------------------------------------------ host patterns


def test_host_patterns() -> None:
    exact, wild, port, anyport, v6 = parse_patterns(
        ["example.com", "*.example.org", "api.test:8443", "docs.test:*", "[2001:db8::1]:80"])
    assert exact.matches(parse_url("https://example.com/x"))
    assert exact.matches(parse_url("http://EXAMPLE.com./"))
    assert not exact.matches(parse_url("https://example.com:8443/"))  # no port: default only
    assert not exact.matches(parse_url("https://www.example.com/"))
    assert wild.matches(parse_url("https://a.b.example.org/")) and not wild.matches(parse_url("https://example.org/"))
    assert not wild.matches(parse_url("https://badexample.org/"))
    assert port.matches(parse_url("https://api.test:8443/")) and not port.matches(parse_url("https://api.test/"))
    assert anyport.matches(parse_url("http://docs.test:9999/"))
    assert v6.matches(parse_url("http://[2001:db8:0::1]/"))
    # A name pattern never covers an address, nor an address pattern a name.
    assert not exact.matches(parse_url("http://93.184.216.34/"))
    assert str(wild) == "*.example.org" and str(anyport) == "docs.test:*"


@pytest.mark.parametrize("text", ["", "*", "*.com", "a.*.com", "http://x.com", "x.com/a", "u@x.com",
                                  "x.com:0", "x.com:abc", "x .com", "*.10.0.0.1", "[::1", "x.com:\x00"])
def test_bad_host_patterns(text: str) -> None:
    with pytest.raises(PatternError):
        HostPattern.parse(text)


# ------------------------------------------------------------------ fetches against the site


@pytest.fixture
async def canary() -> AsyncIterator[tuple[int, list[int]]]:
    async with canary_listener() as port_and_count:
        yield port_and_count


def lite_fetcher(resolver: object, **guard: bool) -> Fetcher:
    return Fetcher(Guard(resolver, **guard), user_agent="test")  # type: ignore[arg-type]


async def fetch(f: Fetcher, url: str, allow: list[str], *, internal_ok: bool = True, max_bytes: int = 200_000):
    try:
        return await f.fetch(parse_url(url), parse_patterns(allow), internal_ok=internal_ok,
                             max_bytes=max_bytes, timeout_s=5, accept=frozenset({"text/html", "text/plain"}))
    finally:
        await f.close()


async def refusal(f: Fetcher, url: str, allow: list[str], **kw: object) -> str:
    with pytest.raises(ToolError) as err:
        await fetch(f, url, allow, **kw)  # type: ignore[arg-type]
    return err.value.code


async def test_every_refusal_happens_before_any_connection(web_site: Site, canary) -> None:
    port, accepted = canary
    resolver = StaticResolver(resolver_table())
    f = lite_fetcher(resolver)
    everything = [f"{h}:{port}" for h in resolver_table()] + [f"127.0.0.1:{port}", f"nowhere.test:{port}"]
    # Not allowlisted (another port of an allowed address, another host).
    assert await refusal(f, f"http://127.0.0.1:{port}/", [f"127.0.0.1:{web_site.port}"]) == "url_not_allowed"
    assert await refusal(f, f"http://other.test:{port}/", [f"site.test:{port}"]) == "url_not_allowed"
    # Allowlisted names whose addresses are never internal hosts: metadata (through a name),
    # 0.0.0.0, IPv4-mapped, and a set with one bad address among good ones... for browser.full.
    for host in ("meta.test", "zero.test", "mapped.test"):
        assert await refusal(f, f"http://{host}:{port}/", everything) == "url_not_allowed", host
    # browser.full's rules (internal_ok=False): private, CGNAT and loopback names are refused.
    for host in ("private.test", "cgnat.test", "site.test", "mixed.test"):
        assert await refusal(f, f"http://{host}:{port}/", everything, internal_ok=False) == "url_not_allowed", host
    for literal in (f"http://[::1]:{port}/", f"http://[::ffff:127.0.0.1]:{port}/", f"http://0x7f.1:{port}/",
                    f"http://2130706433:{port}/", f"http://017700000001:{port}/"):
        code = await refusal(f, literal, everything + [f"[::1]:{port}"], internal_ok=False)
        assert code == "url_not_allowed", literal
    # A redirect from an allowed page to the canary is checked like the first hop.
    to = f"http://127.0.0.1:{port}/"
    assert await refusal(f, web_site.url(f"/redirect?to={to}"), [f"127.0.0.1:{web_site.port}"]) == "url_not_allowed"
    assert await refusal(f, f"http://nowhere.test:{port}/", everything) == "dns_failed"
    assert accepted == []


async def test_metadata_only_when_the_allowlist_names_the_address() -> None:
    guard = Guard(StaticResolver(resolver_table()))
    meta = parse_url("http://169.254.169.254/latest")
    dest = await guard.admit(meta, parse_patterns(["169.254.169.254"]), internal_ok=True)
    assert [str(a) for a in dest.addresses] == ["169.254.169.254"]
    with pytest.raises(ToolError, match="metadata"):
        await guard.admit(parse_url("http://meta.test/"), parse_patterns(["meta.test"]), internal_ok=True)
    with pytest.raises(ToolError, match="metadata"):  # never for the internet tools
        await guard.admit(meta, parse_patterns(["169.254.169.254"]), internal_ok=False)


async def test_test_escape_opens_loopback_only() -> None:
    resolver = StaticResolver(resolver_table())
    allow = parse_patterns(list(resolver_table()))
    closed, escaped = Guard(resolver), Guard(resolver, unsafe_allow_loopback_for_tests=True)
    with pytest.raises(ToolError, match="loopback"):
        await closed.admit(parse_url("http://public.test/"), allow, internal_ok=False)
    assert (await escaped.admit(parse_url("http://public.test/"), allow, internal_ok=False)).addresses
    for host in ("private.test", "meta.test", "cgnat.test", "mapped.test", "mixed.test"):
        with pytest.raises(ToolError):
            await escaped.admit(parse_url(f"http://{host}/"), allow, internal_ok=False)


async def test_connections_go_to_the_checked_address_only(web_site: Site) -> None:
    """DNS rebinding: the name resolves to the site first and to a private address after.
    The guard resolves once per hop and the client connects to that answer."""
    resolver = StaticResolver({"rebind.test": [["127.0.0.1"], ["10.66.66.66"]]})
    f = lite_fetcher(resolver)
    page = await fetch(f, f"http://rebind.test:{web_site.port}/page", [f"rebind.test:{web_site.port}"])
    assert page.status == 200 and b"Local  test page" in page.body
    assert resolver.calls["rebind.test"] == 1
    # The next call sees the new answer, and refuses it under the internet rules.
    assert await refusal(f, f"http://rebind.test:{web_site.port}/page", [f"rebind.test:{web_site.port}"],
                         internal_ok=False) == "url_not_allowed"


async def test_redirects_are_followed_at_most_five_times(web_site: Site) -> None:
    f = lite_fetcher(web_site.resolver)
    allow = [f"127.0.0.1:{web_site.port}"]
    ok = await fetch(f, web_site.url("/chain/4"), allow)  # 5 redirects, then the page
    assert ok.status == 200 and ok.target.path == "/page"
    assert await refusal(f, web_site.url("/chain/5"), allow) == "too_many_redirects"


async def test_bodies_are_read_up_to_the_bound(web_site: Site) -> None:
    f = lite_fetcher(web_site.resolver)
    allow = [f"127.0.0.1:{web_site.port}"]
    big = await fetch(f, web_site.url("/big"), allow, max_bytes=50_000)
    assert big.truncated and len(big.body) == 50_000
    bomb = await fetch(f, web_site.url("/bomb"), allow, max_bytes=100_000)
    assert bomb.truncated and len(bomb.body) == 100_000  # 20 MB once inflated: never inflated
    whole = await fetch(f, web_site.url("/page"), allow)
    assert not whole.truncated and whole.content_type == "text/html"
    assert await refusal(f, web_site.url("/binary"), allow) == "unsupported_content_type"


def test_deep_nesting_is_cut_before_parsing() -> None:
    """Thousands of unclosed blocks would cost the parser quadratic time: only the first 128
    levels are read; ordinary pages (implied end tags, void elements) are never cut."""
    from services.browser.extract import MAX_NESTING, cap_nesting, extract_html

    hostile = "<div>x" * 100_000
    page = extract_html(hostile, "http://x/")
    assert page.cut and page.text.split() == ["x"] * MAX_NESTING
    ordinary = "<ul>" + "<li>item<br><img src=a.png>" * 5000 + "</ul>" + "<div><p>a</div>" * 5000
    assert cap_nesting(ordinary) == (ordinary, False)
    assert not extract_html(ordinary, "http://x/").cut
