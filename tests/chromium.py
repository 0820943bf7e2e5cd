"""A page loaded in headless Chromium, watched through the Chrome DevTools Protocol: every request the page
makes, its console messages and uncaught exceptions, and screenshots. The protocol runs over
--remote-debugging-pipe (file descriptors 3 and 4, messages ending in a NUL byte), so no websocket client is
needed and no port is opened."""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WINDOW = (1280, 1000)


def find_chromium() -> str | None:
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


@dataclass
class PageLoad:
    url: str
    requests: list[str] = field(default_factory=list)  # every URL the page asked for, the page itself first
    console: list[dict] = field(default_factory=list)  # Runtime.consoleAPICalled params
    exceptions: list[dict] = field(default_factory=list)  # Runtime.exceptionThrown params
    log_errors: list[dict] = field(default_factory=list)  # Log.entryAdded entries of level error
    screenshot: np.ndarray | None = None  # the first window, as RGB(A) floats
    clips: dict[str, np.ndarray] = field(default_factory=dict)  # CSS selector -> that element's screenshot
    values: dict[str, object] = field(default_factory=dict)  # JavaScript expression -> its value


class Browser:
    """One headless Chromium, spoken to over a pipe."""

    def __init__(self, executable: str, timeout: float):
        self.deadline = time.monotonic() + timeout
        self.profile = tempfile.TemporaryDirectory()
        to_browser, self.commands = os.pipe()  # the browser reads commands on fd 3
        self.replies, from_browser = os.pipe()  # and writes replies and events on fd 4

        def as_fds_3_and_4() -> None:  # in the child: copies above 10 first, so neither pipe is lost to the other
            read_end, write_end = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser, from_browser))
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        flags = ["--headless", "--disable-gpu", "--remote-debugging-pipe", f"--user-data-dir={self.profile.name}",
                 "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
                 "--disable-extensions", "--hide-scrollbars", f"--window-size={WINDOW[0]},{WINDOW[1]}"]
        if os.geteuid() == 0:
            flags.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self.process = subprocess.Popen(
            [executable, *flags, "about:blank"],
            preexec_fn=as_fds_3_and_4,  # noqa: PLW1509  the tests start no threads
            pass_fds=(3, 4), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self.buffer = b""
        self.events: list[dict] = []
        self.last_id = 0

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self.last_id += 1
        message = {"id": self.last_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        return self.last_id

    def receive(self, wanted) -> dict:
        """Messages until one `wanted` accepts (returned); the others are kept as events."""
        while True:
            while b"\0" in self.buffer:
                raw, _, self.buffer = self.buffer.partition(b"\0")
                message = json.loads(raw)
                if wanted(message):
                    return message
                self.events.append(message)
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.replies], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self.replies, 1 << 20)
            if not chunk:
                raise ConnectionError("Chromium closed the pipe")
            self.buffer += chunk

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        sent = self.send(method, params, session)
        reply = self.receive(lambda m: m.get("id") == sent)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def close(self) -> None:
        try:
            self.send("Browser.close")
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self.commands)
            os.close(self.replies)
            self.profile.cleanup()


def image(data: str) -> np.ndarray:
    from matplotlib.image import imread
    return imread(io.BytesIO(base64.b64decode(data)), format="png")


def load(path: Path, clips: tuple[str, ...] = (), values: tuple[str, ...] = (), executable: str | None = None,
         timeout: float = 30) -> PageLoad:
    """Open `path` in a fresh tab with the Network, Runtime and Log domains on; after the load event, screenshot
    the first window and each selector in `clips`, and evaluate each expression in `values`."""
    browser = Browser(executable or find_chromium() or "chromium", timeout)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Network", "Runtime", "Log", "Page"):
            browser.call(f"{domain}.enable", session=session)
        page = PageLoad(Path(path).resolve().as_uri())
        browser.call("Page.navigate", {"url": page.url}, session)
        browser.receive(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == session)
        page.screenshot = image(browser.call("Page.captureScreenshot", {"format": "png"}, session)["data"])
        for selector in clips:
            box = browser.call("Runtime.evaluate", {"expression": f"JSON.stringify(document.querySelector("
                                                                  f"{json.dumps(selector)}).getBoundingClientRect())",
                                                    "returnByValue": True}, session)["result"]["value"]
            rect = json.loads(box)
            clip = {"x": rect["left"], "y": rect["top"], "width": rect["width"], "height": rect["height"], "scale": 1}
            shot = browser.call("Page.captureScreenshot", {"format": "png", "clip": clip,
                                                           "captureBeyondViewport": True}, session)
            page.clips[selector] = image(shot["data"])
        for expression in values:
            page.values[expression] = browser.call("Runtime.evaluate", {"expression": expression,
                                                                        "returnByValue": True},
                                                   session)["result"].get("value")
        for event in browser.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Network.requestWillBeSent":
                page.requests.append(params["request"]["url"])
            elif method == "Runtime.consoleAPICalled":
                page.console.append(params)
            elif method == "Runtime.exceptionThrown":
                page.exceptions.append(params)
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                page.log_errors.append(params["entry"])
        return page
    finally:
        browser.close()


def distinct_colours(pixels: np.ndarray) -> int:
    rgb = np.round(pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    return len(np.unique(rgb, axis=0))


def inked_share(pixels: np.ndarray) -> float:
    """The share of pixels that are not (nearly) white."""
    return float((pixels[..., :3].min(axis=-1) < 0.95).mean())
