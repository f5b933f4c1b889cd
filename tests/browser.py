"""Headless Chromium driven over the DevTools protocol (a websocket on 127.0.0.1): navigate, run a line of
JavaScript to read the DOM or submit a form, take a screenshot. Debian's `chromium`; tests that need it are skipped
with the reason printed when it is not installed (.ci/run installs it)."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from itertools import count
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One headless Chromium with one page."""

    def __init__(self, profile: Path) -> None:
        binary = chromium_path()
        assert binary is not None, "chromium is not installed"
        profile.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            assert self.process.poll() is None and time.monotonic() < deadline, "chromium did not start"
            time.sleep(0.05)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            page = next(t for t in json.load(answer) if t["type"] == "page")
        self._connection = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10)
        self.socket = self._connection.__enter__()
        self.ids = count(1)
        self.call("Page.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        sent = next(self.ids)
        self.socket.send(json.dumps({"id": sent, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=30))
            if message.get("id") == sent:
                assert "error" not in message, message["error"]
                return dict(message.get("result", {}))

    def _loaded(self) -> None:
        while True:
            message = json.loads(self.socket.recv(timeout=30))
            if message.get("method") == "Page.loadEventFired":
                return

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self._loaded()

    def run(self, expression: str, *, navigates: bool = False) -> Any:
        """The value of a JavaScript expression in the page (`navigates`: it submits a form; wait for the load)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if navigates:
            self._loaded()
        return result.get("result", {}).get("value")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self._connection.__exit__(None, None, None)
        self.process.terminate()
        self.process.wait(10)
