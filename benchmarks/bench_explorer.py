"""The explorer's budget: the page of a GPT-2 (2 layers, from a `transformers` config) training trace is at most 3 MB
and interactive within 1 s in Chromium on this machine.

    python benchmarks/bench_explorer.py [--rounds 5] [--trace saved.json]

Traces benchmarks/workloads/gpt2_train.py (or loads --trace), writes the page, then opens it ROUNDS times in
headless Chromium (selenium + Debian's chromium-driver) and reads, from the page's own clock: when the browser had
parsed the page (DOMContentLoaded), and when the explorer had laid out and drawn the graph and its panels (the
`gv-ready` mark, after which every control answers). It then times what a user does first: clicking a finding
(or, with none, the first box), opening every box that fits, and a search. Prints one table; exits 1 when a
budget is missed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "benchmarks" / "workloads" / "gpt2_train.py"
SIZE_BUDGET = 3 * 10**6
READY_BUDGET_MS = 1000.0
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trace", type=Path, help="a saved GPT-2 trace (.json) instead of tracing the workload")
    args = parser.parse_args()

    import gradviz
    from gradviz.explorer import explorer_html

    folder = Path(tempfile.mkdtemp(prefix="bench-explorer-"))
    if args.trace is None:
        args.trace = folder / "gpt2.json"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gradviz", "render", str(WORKLOAD), "-o", str(args.trace), "-q"],
                       check=True, cwd=folder, stdout=subprocess.DEVNULL)
        print(f"traced {WORKLOAD.name} in {time.perf_counter() - started:.1f} s")
    trace = gradviz.Trace.load(args.trace)
    findings = gradviz.diagnose(trace)
    started = time.perf_counter()
    page = explorer_html(trace, findings)
    build_s = time.perf_counter() - started
    path = folder / "gpt2.html"
    path.write_text(page, encoding="utf-8")
    size = len(page.encode("utf-8"))

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument("--window-size=1280,800")
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    rows: dict[str, list[float]] = {"DOMContentLoaded": [], "interactive (graph drawn)": [],
                                    "click a finding / box": [], "open all boxes": [], "search 'weight'": []}
    try:
        for _ in range(args.rounds):
            driver.get("about:blank")
            driver.get(path.as_uri())
            while driver.execute_script("return document.getElementById('gv-app').dataset.ready") != "1":
                time.sleep(0.01)
            marks = driver.execute_script(
                "const n = performance.getEntriesByType('navigation')[0];"
                "return [n.domContentLoadedEventEnd, performance.getEntriesByName('gv-ready')[0].startTime]")
            rows["DOMContentLoaded"].append(marks[0])
            rows["interactive (graph drawn)"].append(marks[1])
            target = ".gv-finding" if findings else ".gv-node[data-group] rect"
            rows["click a finding / box"].append(timed(driver, f"document.querySelector('{target}')"
                                                               ".dispatchEvent(new MouseEvent('click', {bubbles: true}))"))
            rows["open all boxes"].append(timed(driver, "[...document.querySelectorAll('.gv-graph-bar button')]"
                                                        ".find(b => b.textContent === 'open all').click()"))
            rows["search 'weight'"].append(timed(driver, "const s = document.querySelector('.gv-search');"
                                                         "s.value = 'weight'; s.dispatchEvent(new Event('input'))"))
        drawn = driver.execute_script("return document.querySelectorAll('.gv-node').length")
    finally:
        driver.quit()

    print(f"GPT-2 (2 layers) training trace: {len(trace.nodes)} autograd nodes, {len(trace.tensors)} tensors, "
          f"{len(trace.events)} events; page built in {build_s:.2f} s; {drawn} nodes/boxes drawn after 'open all'")
    print(f"{'measure':<28}{'median':>10}{'min':>10}{'max':>10}   budget")
    print(f"{'page size':<28}{size / 1e6:>9.2f}M{'':>10}{'':>10}   {SIZE_BUDGET / 1e6:.0f} MB "
          f"{'ok' if size <= SIZE_BUDGET else 'MISSED'}")
    ok = size <= SIZE_BUDGET
    for name, values in rows.items():
        budget = ""
        if name.startswith("interactive"):
            met = statistics.median(values) <= READY_BUDGET_MS
            ok = ok and met
            budget = f"{READY_BUDGET_MS:.0f} ms {'ok' if met else 'MISSED'}"
        print(f"{name:<28}{statistics.median(values):>8.0f}ms{min(values):>8.0f}ms{max(values):>8.0f}ms   {budget}")
    return 0 if ok else 1


def timed(driver: object, action: str) -> float:
    """Milliseconds the page spends on `action`, measured in the page, including the style and layout it causes."""
    return float(driver.execute_script(  # type: ignore[attr-defined]
        f"const t = performance.now(); {action}; document.body.getBoundingClientRect(); return performance.now() - t"))


if __name__ == "__main__":
    sys.exit(main())
