#!/usr/bin/env python3
"""Ask a real Pi which context it builds for session files (no model, no network).

Adapted from shared/tools/pi_load_check.py. Never touches the given files: each
check runs on a copy in a temp folder (Pi may migrate or rewrite what it opens).
The copy's header `cwd` is pointed at the temp folder when it names a folder
that does not exist (Pi's RPC mode refuses a missing cwd; the context does not
depend on it).

Usage: pi_context.py --node node --cli <pi dist/cli.js> FILE...
Prints one JSON object per file:
  {"file", "export_rc", "export_leaf", "export_entries", "rpc_rc", "state",
   "messages": [...AgentMessage as Pi reports with get_messages...], "changed_input"}
"""
import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fix_cwd(path, cwd):
    with open(path, "rb") as f:
        data = f.read()
    nl = data.find(b"\n")
    first = data if nl < 0 else data[:nl]
    try:
        h = json.loads(first)
    except Exception:
        return
    if not isinstance(h, dict) or h.get("type") != "session":
        return
    if isinstance(h.get("cwd"), str) and os.path.isdir(h["cwd"]):
        return
    h["cwd"] = cwd
    rest = b"" if nl < 0 else data[nl:]
    with open(path, "wb") as f:
        f.write(json.dumps(h, separators=(",", ":"), ensure_ascii=False).encode() + rest)


def check(node, cli, path, timeout):
    out = {"file": path}
    with tempfile.TemporaryDirectory(prefix="pi-ctx-") as tmp:
        agent = os.path.join(tmp, "agent")
        os.makedirs(agent)
        env = dict(os.environ, PI_CODING_AGENT_DIR=agent, HOME=tmp, PI_OFFLINE="1",
                   PI_TELEMETRY="0", PI_SKIP_VERSION_CHECK="1", NO_COLOR="1")
        env.pop("PI_CODING_AGENT_SESSION_DIR", None)

        exp = os.path.join(tmp, "export.jsonl")
        shutil.copyfile(path, exp)
        html = os.path.join(tmp, "out.html")
        p = subprocess.run([node, cli, "--export", exp, html], cwd=tmp, env=env,
                           capture_output=True, text=True, timeout=timeout)
        out["export_rc"] = p.returncode
        if p.returncode != 0:
            out["export_output"] = (p.stdout + p.stderr).strip()[-400:]
        if p.returncode == 0 and os.path.exists(html):
            m = re.search(r'<script[^>]*id="session-data"[^>]*>(.*?)</script>',
                          open(html, encoding="utf-8").read(), re.S)
            if m:
                data = json.loads(base64.b64decode(m.group(1).strip()))
                out["export_leaf"] = data.get("leafId")
                out["export_entries"] = len(data.get("entries") or [])

        rpcf = os.path.join(tmp, "rpc.jsonl")
        shutil.copyfile(path, rpcf)
        fix_cwd(rpcf, tmp)
        before = sha(rpcf)
        # Keep stdin open until both responses arrived: Pi exits as soon as
        # stdin closes and may cut a large get_messages response short.
        proc = subprocess.Popen([node, cli, "--mode", "rpc", "--no-extensions", "--session", rpcf],
                                cwd=tmp, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            for c in ({"id": "s", "type": "get_state"}, {"id": "m", "type": "get_messages"}):
                proc.stdin.write(json.dumps(c) + "\n")
            proc.stdin.flush()
            pending = {"s", "m"}
            for line in proc.stdout:
                if not line.strip():
                    continue
                try:
                    o = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if o.get("type") != "response":
                    continue
                d = o.get("data") or {}
                if o.get("id") == "s":
                    out["state"] = {"success": o.get("success"), "messageCount": d.get("messageCount"),
                                    "sessionName": d.get("sessionName"),
                                    "thinkingLevel": d.get("thinkingLevel")}
                elif o.get("id") == "m":
                    out["messages"] = d.get("messages")
                pending.discard(o.get("id"))
                if not pending:
                    break
            proc.stdin.close()
            rest = proc.stdout.read()
            err = proc.stderr.read()
            proc.wait()
        finally:
            timer.cancel()
        out["rpc_rc"] = proc.returncode
        if err.strip():
            out["rpc_stderr"] = err.strip()[-400:]
        out["changed_input"] = sha(rpcf) != before
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", default="node")
    ap.add_argument("--cli", required=True)
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    for f in a.files:
        print(json.dumps(check(a.node, a.cli, os.path.abspath(f), a.timeout)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
