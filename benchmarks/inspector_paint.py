"""Time to first paint of the inspector on a 100k-message session (issue 18's report; not a timed test).

    .venv/bin/python benchmarks/inspector_paint.py                    # 100,000 messages
    .venv/bin/python benchmarks/inspector_paint.py --messages 10000   # a quick run
    .venv/bin/python benchmarks/inspector_paint.py --path FOLDER     # keep (and reuse) the filled memory

A session is filled through the public API (user/assistant turns from the demo conversation's
small talk, 1,000 messages per ``add_messages``, keyword recall only), the inspector is started on
it, and the system's headless Chromium (/usr/bin/chromium, driven by Playwright) opens:
the sessions page, the session page (which opens on the window), a page deep in the history,
and the session page with a query (``context()`` with recall). For each: the server's response
time and the browser's first contentful paint (``performance`` paint timing, from navigation
start). The tokens-per-tier plot is an image loaded after the page; its first and cached
render times are reported apart.
"""

from __future__ import annotations

import argparse
import json
import platform
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# First contentful paint may come after "load" on a small page: wait for the entry (buffered observer).
PAINT_JS = """() => new Promise(resolve => {
  const n = performance.getEntriesByType('navigation')[0];
  const done = fcp => resolve({response: n.responseEnd - n.requestStart, fcp: fcp});
  new PerformanceObserver(list => {
    const e = list.getEntriesByName('first-contentful-paint')[0];
    if (e) done(e.startTime);
  }).observe({type: 'paint', buffered: true});
  setTimeout(() => done(null), 5000);
})"""
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def fill(path: Path, messages: int) -> float:
    from langmem_tiers import TieredMemory
    from langmem_tiers.cli.conversation import SMALL_TALK

    start = time.perf_counter()
    with TieredMemory.open(path, session_id="big", user_id="bench", embedder=False) as memory:
        have = memory.stats().messages
        batch: list[dict[str, Any]] = []
        clock = 1_767_225_600.0  # 2026-01-01
        for i in range(have // 2, messages // 2):
            user, answer = SMALL_TALK[i % len(SMALL_TALK)]
            clock += 60
            batch += [{"role": "user", "content": f"{user} (#{i})", "created_at": clock},
                      {"role": "assistant", "content": answer, "created_at": clock + 5}]
            if len(batch) >= 1000:
                memory.add_messages(batch)
                batch = []
        if batch:
            memory.add_messages(batch)
        memory.flush()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--path", default=None, help="memory folder to fill (reused when it holds enough)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from langmem_tiers.inspector.server import running
    from langmem_tiers.inspector.settings import InspectorSettings

    folder = Path(args.path) if args.path else Path(tempfile.mkdtemp(prefix="inspector-paint-"))
    fill_s = fill(folder, args.messages)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    settings = InspectorSettings.resolve(str(folder), port=port, vectors=False)
    session = "session=big&user=bench"
    pages = {"sessions page": "/", "session (window)": f"/session?{session}",
             "session, deep page": f"/session?{session}&after={args.messages // 2}",
             "session + query": f"/session?{session}&q=How+long+should+I+boil+an+egg"}
    figures: dict[str, Any] = {"messages": args.messages, "fill_s": round(fill_s, 1),
                               "machine": f"{platform.machine()}, {platform.python_version()}"}
    with running(settings) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, headless=True, args=FLAGS)
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        page = context.new_page()
        page.goto(url)
        base = url.split("?", 1)[0].rstrip("/")
        for name, path in pages.items():
            paints, responses = [], []
            for _ in range(args.repeat):
                tab = context.new_page()  # a fresh tab per visit: paint timing is per document
                tab.goto(base + path, wait_until="load")
                timing = tab.evaluate(PAINT_JS)
                tab.close()
                responses.append(timing["response"])
                if timing["fcp"] is not None:
                    paints.append(timing["fcp"])
            figures[name] = {"first_paint_ms_p50": round(statistics.median(paints), 1) if paints else None,
                             "first_paint_ms_max": round(max(paints), 1) if paints else None,
                             "server_ms_p50": round(statistics.median(responses), 1)}
            print(name, figures[name], file=sys.stderr, flush=True)
        plot = f"{base}/session/plot.svg?{session}"
        for label in ("plot_first_render_ms", "plot_cached_ms"):
            start = time.perf_counter()
            page.goto(plot, timeout=300_000)
            figures[label] = round((time.perf_counter() - start) * 1000, 1)
        browser.close()
    print(json.dumps(figures, indent=2))
    print(f"memory kept in {folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
