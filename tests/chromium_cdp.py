"""A real headless Chromium (Debian's ``chromium``) driven over the DevTools protocol for the page tests: one
browser a module, each page loaded in a fresh tab, with what the page said on its console (errors, uncaught
exceptions, Content-Security-Policy refusals, failed loads) and every request it made.

The protocol runs over ``--remote-debugging-pipe`` (JSON messages ended by a NUL byte, the browser reading
fd 3 and writing fd 4): Python's standard library only, no websocket client, no port."""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless=new",
    "--no-sandbox",  # root in CI; the pages are our own files
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-background-networking",
    "--remote-debugging-pipe",
)


def chromium_path() -> str | None:
    return shutil.which("chromium")


@dataclass
class Page:
    """One page loaded in its own tab: the console's errors, the URLs requested, and the tab's session."""

    url: str
    session: str
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def _console_error(method: str, params: dict[str, Any]) -> str | None:
    """The message of an event that is an error on the page's console, else None."""
    if method == "Runtime.exceptionThrown":
        d = params["exceptionDetails"]
        return f"uncaught: {d.get('exception', {}).get('description') or d.get('text')}"
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
        return f"console.{params['type']}: {args}"
    if method == "Log.entryAdded" and params["entry"].get("level") == "error":
        e = params["entry"]
        return f"{e.get('source')}: {e.get('text')} {e.get('url', '')}".strip()
    if method == "Network.loadingFailed":
        return f"load failed: {params.get('errorText') or params.get('blockedReason')}"
    return None


class Chromium:
    """``with Chromium(profile_dir) as browser: page = browser.load(path)``."""

    def __init__(self, profile: Path, timeout: float = 30.0) -> None:
        exe = chromium_path()
        if exe is None:
            raise FileNotFoundError("chromium")
        self.timeout = timeout
        to_browser_r, self._to_browser = os.pipe()
        from_browser, from_browser_w = os.pipe()
        # above 9, so that fds 3 and 4 are free to be made in the child (bash: any fd number)
        a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
        b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._from_browser = from_browser
        self.log = profile / "chromium.stderr"
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                [
                    "/bin/bash",
                    "-c",
                    f'exec "$0" "$@" 3<&{a} 4>&{b} {a}<&- {b}>&-',
                    exe,
                    *FLAGS,
                    f"--user-data-dir={profile / 'profile'}",
                    "about:blank",
                ],
                pass_fds=(a, b),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,  # its helpers in its own process group, ended with it
            )
        os.close(a)
        os.close(b)
        self._buf = b""
        self._next = 0
        self._events: list[dict[str, Any]] = []

    # ---- the protocol

    def _send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> int:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        return self._next

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError(f"chromium: no answer in {self.timeout:.0f} s ({self.log})")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise EOFError(f"chromium closed its DevTools pipe (exit {self.proc.poll()}; {self.log})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        msg: dict[str, Any] = json.loads(raw)
        return msg

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        """Send one command and return its result; the events that come first are kept."""
        sent = self._send(method, params, session)
        deadline = time.monotonic() + self.timeout
        while True:
            msg = self._read(deadline)
            if msg.get("id") == sent:
                if "error" in msg:
                    raise RuntimeError(f"chromium: {method}: {msg['error']}")
                return msg.get("result", {})
            self._events.append(msg)

    def _wait_event(self, method: str, session: str) -> None:
        deadline = time.monotonic() + self.timeout
        for i, msg in enumerate(self._events):
            if msg.get("method") == method and msg.get("sessionId") == session:
                del self._events[i]
                return
        while True:
            msg = self._read(deadline)
            if msg.get("method") == method and msg.get("sessionId") == session:
                return
            self._events.append(msg)

    # ---- pages

    def load(self, path: Path) -> Page:
        """``path`` in a new tab, until its load event; the console's errors and the requests until then
        (a round trip after the load: every event the page raised while loading has arrived)."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.call(f"{domain}.enable", session=session)
        page = Page(path.resolve().as_uri(), session)
        self._events = [m for m in self._events if m.get("sessionId") != session]
        nav = self.call("Page.navigate", {"url": page.url}, session)
        if nav.get("errorText"):
            raise RuntimeError(f"chromium: {page.url}: {nav['errorText']}")
        self._wait_event("Page.loadEventFired", session)
        self.evaluate(page, "1")
        for msg in self._events:
            if msg.get("sessionId") != session:
                continue
            method, params = msg.get("method", ""), msg.get("params", {})
            if method == "Network.requestWillBeSent":
                page.requests.append(params["request"]["url"])
            error = _console_error(method, params)
            if error:
                page.errors.append(error)
        self._events = [m for m in self._events if m.get("sessionId") != session]
        return page

    def evaluate(self, page: Page, expression: str) -> Any:
        """An expression's value (JSON-able) in the page."""
        got = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, page.session)
        if "exceptionDetails" in got:
            raise RuntimeError(f"chromium: {expression[:60]}: {got['exceptionDetails']}")
        return got["result"].get("value")

    # ---- the end

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self._send("Browser.close")
                self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group this browser was started in
            self.proc.wait(timeout=10)
        finally:
            os.close(self._to_browser)
            os.close(self._from_browser)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
