"""A minimal Chrome DevTools Protocol client over pipes (stdlib only), for driving a headless
Chromium in tests and for the docs screenshot (tools/make_viz_screenshot.py).

Chromium started with ``--remote-debugging-pipe`` reads commands from its fd 3 and writes
replies and events to its fd 4: JSON messages, each ended by a NUL byte.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    """The path of a Chromium-family browser on PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


class CdpError(RuntimeError):
    pass


class Browser:
    """A headless browser with one page: ``with Browser() as b: b.goto(url); b.eval("1+1")``.
    Every wait has a deadline (``timeout`` seconds): it never hangs."""

    def __init__(self, path: str | None = None, timeout: float = 30.0, size=(1280, 800)):
        path = path or find_browser()
        if path is None:
            raise CdpError(f"no browser found (looked for {', '.join(BROWSERS)})")
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="fg-cdp-")
        to_child_r, self._w = os.pipe()  # we write commands; the browser reads fd 3
        self._r, from_child_w = os.pipe()  # the browser writes fd 4; we read
        args = [
            path,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--allow-file-access-from-files",
            f"--user-data-dir={self._profile}",
            f"--window-size={size[0]},{size[1]}",
            "--remote-debugging-pipe",
            "about:blank",
        ]

        def child_fds():  # (copies first: a pipe end may itself be fd 3 or 4)
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            args,
            preexec_fn=child_fds,
            pass_fds=(3, 4),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.session = None
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next((t for t in targets if t["type"] == "page"), None)
        if page is None:
            page = {"targetId": self.call("Target.createTarget", url="about:blank")["targetId"]}
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)[
            "sessionId"
        ]
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _read_message(self, deadline: float) -> dict:
        import select

        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError("timed out waiting for the browser")
            ready, _, _ = select.select([self._r], [], [], left)
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise CdpError("the browser closed its pipe")
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, **params):
        """Send one command and wait for its result (events met meanwhile are dropped, except
        that :meth:`goto` waits for ``Page.loadEventFired``)."""
        return self._call(method, params)[0]

    def _call(self, method, params, wait_event: str | None = None):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        result, seen_event = None, wait_event is None
        while result is None or not seen_event:
            m = self._read_message(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise CdpError(f"{method}: {m['error']}")
                result = m.get("result", {})
            elif wait_event and m.get("method") == wait_event:
                seen_event = True
        return result, seen_event

    def goto(self, url: str) -> None:
        """Load ``url`` and wait for its load event."""
        self._call("Page.navigate", {"url": url}, wait_event="Page.loadEventFired")

    def eval(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serialisable results)."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in r:
            raise CdpError(f"{expression!r}: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def click(self, x: float, y: float) -> None:
        """A left click at viewport position ``(x, y)``."""
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self) -> bytes:
        """The viewport as PNG bytes."""
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    os.write(self._w, json.dumps({"id": 0, "method": "Browser.close"}).encode())
                    os.write(self._w, b"\0")
                    self.proc.wait(5)
                except (OSError, subprocess.TimeoutExpired):
                    self.proc.kill()
                    self.proc.wait(5)
        finally:
            for fd in (self._w, self._r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
