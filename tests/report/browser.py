"""Headless Chromium driven over the DevTools protocol on a pipe: no driver, no port, no download.

``chromium --remote-debugging-pipe`` reads protocol messages on fd 3 and writes them on fd 4,
each a JSON text ended by a NUL byte (https://chromedevtools.github.io/devtools-protocol/,
``--remote-debugging-pipe`` in chrome/browser/devtools/devtools_pipe_handler.cc). Nothing
listens on a socket, so nothing but this process can drive the browser, and no Selenium
Manager or chromedriver download can happen. One :class:`Browser` serves a whole test module;
:meth:`Browser.open` loads a page and records every request the page makes (Network events),
so a test can assert that none leaves it.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"  # Debian's package (scripts/setup installs it)
WIDTH, HEIGHT = 1280, 900
# The suite contacts no address but loopback: no background traffic, every name unresolvable and
# every connection through a proxy on a closed loopback port. A request a page makes still shows in
# the Network events the tests read; it just never leaves the machine.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
         "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-default-apps", "--mute-audio",
         "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=socks5://127.0.0.1:9",
         f"--window-size={WIDTH},{HEIGHT}")

INK_SCRIPT = """(async () => {
  const img = new Image(); img.src = "data:image/png;base64,DATA"; await img.decode();
  const c = document.createElement("canvas"); c.width = img.width; c.height = img.height;
  const g = c.getContext("2d"); g.drawImage(img, 0, 0);
  const px = g.getImageData(0, 0, c.width, c.height).data;
  let differ = 0, seen = 0; const colours = new Set();
  for (let i = 0; i < px.length; i += 4 * 7) {  // every 7th pixel: a prime stride crosses every column
    seen++;
    if (px[i] !== px[0] || px[i + 1] !== px[1] || px[i + 2] !== px[2]) differ++;
    colours.add(px[i] << 16 | px[i + 1] << 8 | px[i + 2]);
  }
  return {width: c.width, height: c.height, ink: differ / seen, colours: colours.size};
})()"""


def missing_reason() -> str | None:
    """Why no browser can run here (None: it can)."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is not installed (scripts/setup installs Debian's chromium package)"
    return None


class Browser:
    def __init__(self) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="introspect-chromium-"))
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def pipes() -> None:  # in the child: the protocol's fds 3 and 4 (inheritable duplicates)
            read_end, write_end = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.process = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                        preexec_fn=pipes, close_fds=False, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self._scratch: str | None = None
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for method in ("Page.enable", "Network.enable", "Runtime.enable"):
            self.call(method, session=self.session)
        self.call("Emulation.setDeviceMetricsOverride", session=self.session, width=WIDTH, height=HEIGHT,
                  deviceScaleFactor=1, mobile=False)

    # ---------------------------------------------------------------- protocol

    def call(self, method: str, *, session: str | None = None, timeout: float = 20.0, **params: Any) -> Any:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if not select.select([self._from_browser], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise EOFError("chromium closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    # ---------------------------------------------------------------- pages

    def open(self, path: Path) -> list[str]:
        """Load ``path``; returns the URL of every request the page made besides itself, and every
        WebSocket or EventSource it opened (a self-contained page makes none)."""
        self.events.clear()
        url = path.resolve().as_uri()
        self.call("Page.bringToFront", session=self.session)  # a page in the background paints no frame
        self.call("Page.navigate", session=self.session, url=url)
        deadline = time.monotonic() + 20
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._receive(deadline))
        self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")  # painted
        requests = [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]
        sockets = [e["params"]["url"] for e in self.events
                   if e.get("method") in ("Network.webSocketCreated", "Network.eventSourceMessageReceived")]
        return [u for u in requests if u != url] + sockets

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=self.session, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, full_page: bool = True, until: int | None = None) -> bytes:
        """A PNG of the page at 1280 px: the whole page with ``full_page`` (down to ``until`` px when
        given), else the viewport."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            height = until or self.evaluate("document.documentElement.scrollHeight")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": WIDTH, "height": height,
                                                             "scale": 1})
        return base64.b64decode(self.call("Page.captureScreenshot", session=self.session, **params)["data"])

    def ink(self, png: bytes) -> dict[str, Any]:
        """How much of a screenshot is drawn: the PNG decoded on a canvas of a blank page of its own
        (not the report's, whose policy refuses data: images): the share of pixels that differ from
        the top-left one, and how many distinct colours a grid of samples holds."""
        if self._scratch is None:
            target = self.call("Target.createTarget", url="about:blank", background=True)["targetId"]
            self._scratch = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.bringToFront", session=self._scratch)  # a tab in the background decodes no image
        script = INK_SCRIPT.replace("DATA", base64.b64encode(png).decode())
        result = self.call("Runtime.evaluate", session=self._scratch, expression=script, returnByValue=True,
                           awaitPromise=True)
        return result["result"]["value"]

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (OSError, EOFError, TimeoutError, RuntimeError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk (https://www.w3.org/TR/png/#11IHDR)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height
