"""Console benchmark (run by hand: python bench/console.py).

A whole stack (`toolproxy up`'s, 2 proxy workers) and a governance console open in headless
Chromium (Debian's, driven by Playwright). For each of N held greenfood orders:

- held -> visible: from the agent's invoke being sent (and from its 202 arriving) to the card
  being in the page's DOM (a MutationObserver in the page stamps it with the wall clock:
  performance.timeOrigin + performance.now(), the same clock as time.time() here);
- decided -> gone: from the decision (deny, over HTTP, by another governance token) being sent
  to the card leaving the page.

The stream may be served by the other worker than the one holding the call: the hold reaches
it by Postgres NOTIFY, as it would another replica. Also prints the page weight (HTML + JS +
CSS, raw and gzipped). Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import platform
import sys
import time
from importlib import resources
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.identity.tokens import mint  # noqa: E402

CHROMIUM = os.environ.get("TOOLPROXY_TEST_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage"]
ORDER = {"op": "create_order", "product_id": "milk", "qty": 1}

OBSERVE = """() => {
  window.__seen = {}; window.__gone = {};
  const now = () => performance.timeOrigin + performance.now();
  new MutationObserver((records) => {
    for (const r of records) {
      for (const n of r.addedNodes) if (n.dataset && n.dataset.callId) window.__seen[n.dataset.callId] = now();
      for (const n of r.removedNodes) if (n.dataset && n.dataset.callId) window.__gone[n.dataset.callId] = now();
    }
  }).observe(document.getElementById("page-inbox"), {childList: true, subtree: true});
}"""


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def line(label: str, xs: list[float]) -> str:
    return (f"  {label:<34} p50 {pct(xs, .5):7.1f} ms   p90 {pct(xs, .9):7.1f} ms   "
            f"max {max(xs):7.1f} ms   (n={len(xs)})")


def page_weight() -> tuple[int, int, int]:
    root = resources.files("proxy.web.console") / "static"
    files = [e for e in root.iterdir() if e.name.endswith((".html", ".js", ".css"))]
    raw = sum(len(e.read_bytes()) for e in files)
    packed = sum(len(gzip.compress(e.read_bytes(), 9)) for e in files)
    return len(files), raw, packed


async def stamp(page: object, key: str, call_id: str, timeout_s: float = 10.0) -> float:
    await page.wait_for_function(  # type: ignore[attr-defined]
        f"id => window.{key}[id] !== undefined", arg=call_id, timeout=timeout_s * 1000)
    return await page.evaluate(f"id => window.{key}[id]", call_id) / 1000.0  # type: ignore[attr-defined]


async def run(n: int, workers: int) -> list[str]:
    from playwright.async_api import async_playwright

    stack = bench_stack(workers)
    out: list[str] = []
    try:
        await stack.start()
        agent = await prepare(stack, tools=("greenfood.order",))
        settings = Settings(data_dir=stack.data_dir)
        gov = mint(settings, agent_id="bench-gov", team_id=TEAM, role="governance", ttl_s=3600)
        decider = {"Authorization": "Bearer " + mint(settings, agent_id="bench-gov2", team_id=TEAM,
                                                      role="governance", ttl_s=3600)}
        async with async_playwright() as p, aiohttp.ClientSession() as http:
            browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            page = await browser.new_page()
            await page.goto(f"{stack.url}/console")
            await page.fill("#login-token", gov)
            await page.click("#login button[type=submit]")
            await page.wait_for_selector("#page-inbox .status.live")
            await page.evaluate(OBSERVE)
            from_send, from_202, gone = [], [], []
            for i in range(n + 5):
                t0 = time.time()
                async with http.post(f"{stack.url}/v1/tools/invoke", json={"tool": "greenfood.order", "args": ORDER},
                                     headers=agent) as r:
                    body = await r.json()
                    assert r.status == 202, body
                t1 = time.time()
                seen = await stamp(page, "__seen", body["call_id"])
                t2 = time.time()
                async with http.post(f"{stack.url}/v1/approvals/{body['approval_id']}/decision",
                                     json={"decision": "deny", "reason": "bench"}, headers=decider) as r:
                    assert r.status == 200, await r.text()
                left = await stamp(page, "__gone", body["call_id"])
                if i >= 5:  # warm-up left out
                    from_send.append((seen - t0) * 1000)
                    from_202.append((seen - t1) * 1000)
                    gone.append((left - t2) * 1000)
            await browser.close()
        out += [f"{n} held greenfood orders, one open console ({workers} proxy workers):",
                line("invoke sent -> card visible", from_send),
                line("202 received -> card visible", from_202),
                line("decision sent -> card gone", gone)]
    finally:
        remove(stack)
    files, raw, packed = page_weight()
    out.append(f"page weight: {files} files (HTML + JS + CSS), {raw:,} bytes, {packed:,} bytes gzipped "
               f"(no library, no images, no fonts)")
    return out


async def main(args: argparse.Namespace) -> None:
    results = await run(args.n, args.workers)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, loopback\n")
    print("\n".join(results))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    asyncio.run(main(ap.parse_args()))
