"""Screenshots of the explorer for README.md: `python gallery/explorer_screenshots.py` (needs Chromium and
chromium-driver, as the browser tests do). Writes gallery/images/explorer_*.png at 1280x800.

Each page is opened as a reader would first use it: the .data example with its finding clicked, the DCGAN and the
GPT-2 training run (benchmarks/workloads/gpt2_train.py, GPT-2 built from a `transformers` config) as they open."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHOTS = {
    "explorer_data_silent": (HERE / "plot_02_data_silent.py", "#finding=1"),
    "explorer_dcgan": (HERE / "plot_21_dcgan.py", "#finding=1"),
    "explorer_gpt2": (HERE.parent / "benchmarks" / "workloads" / "gpt2_train.py", ""),
}
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", "--hide-scrollbars"]


def main() -> int:
    import gradviz
    from gradviz.explorer import explorer_html
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    folder = Path(tempfile.mkdtemp(prefix="explorer-shots-"))
    try:
        for name, (script, fragment) in SHOTS.items():
            trace = gradviz.trace_script(script)
            page = folder / f"{name}.html"
            page.write_text(explorer_html(trace, gradviz.diagnose(trace)), encoding="utf-8")
            driver.set_window_size(1280, 800)
            inner = driver.execute_script("return [innerWidth, innerHeight]")
            driver.set_window_size(1280 + 1280 - inner[0], 800 + 800 - inner[1])  # the page itself is 1280x800
            driver.get(page.as_uri() + fragment)
            while driver.execute_script("return document.getElementById('gv-app').dataset.ready") != "1":
                time.sleep(0.05)
            time.sleep(0.2)
            out = HERE / "images" / f"{name}.png"
            driver.save_screenshot(str(out))
            print(f"wrote {out.relative_to(HERE.parent)}")
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
