#!/usr/bin/env python3
"""Screenshot a live page with headless Chromium after letting it run in real time.

`chromium --screenshot` captures right after load, and --virtual-time-budget
fast-forwards the page's clock, which skews rates the status page computes
from counter deltas. This drives Chromium over the DevTools protocol on
--remote-debugging-pipe (fd 3 in, fd 4 out, NUL-separated JSON; no extra
Python modules) so the page polls for `--wait` real seconds first.

    docs/screenshot.py http://127.0.0.1:19464/ docs/status-page.png --wait 25
"""
import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class Browser:
    def __init__(self, binary, width, height):
        self.profile = tempfile.mkdtemp(prefix="flatline-shot-")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        # Chromium reads commands on fd 3 and writes replies on fd 4. Park the
        # child's ends on high fds first so the dup2 calls cannot clobber them.
        cmd_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 100)
        rep_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 100)
        for fd in (to_chrome_r, from_chrome_w):
            os.close(fd)

        def child_fds():
            os.dup2(cmd_r, 3)
            os.dup2(rep_w, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", "--remote-debugging-pipe", "--user-data-dir=" + self.profile,
             "--window-size=%d,%d" % (width, height), "about:blank"],
            preexec_fn=child_fds, pass_fds=(3, 4),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(rep_w)
        self.buf = b""
        self.next_id = 0

    def call(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError("%s: %s" % (method, reply["error"]))
                    return reply.get("result", {})
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium exited")
            self.buf += chunk
        raise TimeoutError(method)

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("out")
    ap.add_argument("--wait", type=float, default=25, help="seconds the page runs before the capture")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    a = ap.parse_args()
    b = Browser(a.chromium, a.width, a.height)
    try:
        target = b.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = b.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        b.call("Emulation.setDeviceMetricsOverride",
               {"width": a.width, "height": a.height, "deviceScaleFactor": 1, "mobile": False}, s)
        nav = b.call("Page.navigate", {"url": a.url}, s)
        if nav.get("errorText"):
            sys.exit("screenshot: %s: %s" % (a.url, nav["errorText"]))
        time.sleep(a.wait)
        png = b.call("Page.captureScreenshot", {"format": "png"}, s)["data"]
        with open(a.out, "wb") as f:
            f.write(base64.b64decode(png))
        print("wrote %s (%dx%d after %.0fs)" % (a.out, a.width, a.height, a.wait))
    finally:
        b.close()


if __name__ == "__main__":
    main()
