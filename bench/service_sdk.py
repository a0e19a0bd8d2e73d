"""Benchmark: what the service SDK costs a service per call. The real `math` tool served by the
SDK (services.sdk.Service: its team slots, deadline, log context, request model and argument
check) against a bare nats-py subscriber that evaluates the same expression and answers,
each in a process of its own on an embedded NATS, sent the same requests one at a time with
the proxy's headers. Prints the responder's CPU and the wall time per request, round after
round. Run by hand: `python bench/service_sdk.py [--requests 5000] [--rounds 3]`.

What it tells: how much of a call's forward (the service's share of it) is the SDK's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.procs import Sampler  # noqa: E402
from infra.embedded.nats import EmbeddedNats  # noqa: E402
from infra.embedded.ports import free_port  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from infra.call_keys import encode_public  # noqa: E402
from proxy.core.forward import CallMeta, headers_for  # noqa: E402
from proxy.core.signing import ContextSigner  # noqa: E402
from wire.call_context import H_CALL_CONTEXT  # noqa: E402
from infra.ids import new_id  # noqa: E402

SUBJECT = "bench.sdk.math"

RESPONDER = '''
import asyncio, sys
import nats, orjson, uvloop
URL, KIND, SUBJECT = sys.argv[1], sys.argv[2], sys.argv[3]

async def main():
    nc = await nats.connect(URL)
    if KIND == "sdk":
        from services.math.service import math_tool
        from wire import protocol
        from services.sdk.service import Service
        protocol.invoke_subject = lambda tool: SUBJECT  # the SDK as it is, on a subject of its own
        await Service(name="bench-math", tools=[math_tool]).start(nc)
    else:
        from services.math.ops import evaluate
        async def answer(msg):
            expr = orjson.loads(msg.data)["args"]["expr"]
            await nc.publish(msg.reply, orjson.dumps({"ok": True, "output": {"value": evaluate(expr)}}))
        await nc.subscribe(SUBJECT, queue="bench", cb=answer)
    await nc.flush()
    print("ready", flush=True)
    await asyncio.Event().wait()

uvloop.run(main())
'''


# The SDK verifies the proxy's signature on every call (services/sdk/trust.py): the responder
# trusts this key's public half, as services trust the proxy's.
KEY = Ed25519PrivateKey.generate()
SIGNER = ContextSigner(KEY)


def headers(deadline_s: float, payload: bytes) -> dict[str, str]:
    """The headers the proxy sends with every call, for a new call, its context signed."""
    meta = CallMeta(call_id=new_id(), decision_id=new_id(), team_id="bench", agent_id="bench-agent",
                    run_id="run-1", confidential=False)
    deadline = time.time() + deadline_s
    h = headers_for(meta, deadline)
    h[H_CALL_CONTEXT] = SIGNER.seal(meta, subject=SUBJECT, body=payload, deadline_epoch_s=deadline)
    return h


async def measure(url: str, kind: str, requests: int) -> tuple[float, float]:
    """(responder CPU, wall) per request, in microseconds."""
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS=encode_public(KEY.public_key()))
    proc = subprocess.Popen([sys.executable, "-c", RESPONDER, url, kind, SUBJECT],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        sampler = Sampler({"responder": proc.pid})
        nc = await nats.connect(url)
        for i in range(300):  # warm both sides
            body = orjson.dumps({"args": {"expr": f"{i}+1"}, "context": {}})
            await nc.request(SUBJECT, body, headers=headers(5, body), timeout=5)
        sampler.mark()
        bodies = [orjson.dumps({"args": {"expr": f"{i}+{i}*4"}, "context": {}}) for i in range(requests)]
        signed = [headers(5, b) for b in bodies]  # signed before the clock starts: the proxy's cost
        t0 = time.perf_counter()
        for body, h in zip(bodies, signed):
            reply = await nc.request(SUBJECT, body, headers=h, timeout=5)
        wall = time.perf_counter() - t0
        cpu = sampler.since_mark()["responder"]
        assert orjson.loads(reply.data)["ok"] is True, reply.data
        await nc.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return 1e6 * cpu / requests, 1e6 * wall / requests


async def main(requests: int, rounds: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-service-sdk-"))
    server = EmbeddedNats(root / "nats", free_port())
    server.start(root / "nats.log")
    try:
        await server.wait_ready()
        print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}; "
              f"NATS on loopback; {requests} sequential requests per run, the proxy's headers\n")
        figures: dict[str, list[tuple[float, float]]] = {"bare": [], "sdk": []}
        for r in range(rounds):
            for kind in ("bare", "sdk"):  # alternating, so that the machine's drift hits both
                cpu, wall = await measure(server.url, kind, requests)
                figures[kind].append((cpu, wall))
                print(f"round {r + 1}: {'bare subscriber' if kind == 'bare' else 'SDK math service':<17} "
                      f"responder CPU {cpu:6.1f} us, wall {wall:6.1f} us per request")
        cpu = {k: statistics.median(c for c, _ in v) for k, v in figures.items()}
        wall = {k: statistics.median(w for _, w in v) for k, v in figures.items()}
        print(f"\nthe SDK's cost per call (medians): responder CPU +{cpu['sdk'] - cpu['bare']:.1f} us, "
              f"wall +{wall['sdk'] - wall['bare']:.1f} us")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    asyncio.run(main(a.requests, a.rounds))
