#!/usr/bin/env python3
"""Extra checks beyond the A-M table (same host-side checking). Prints a markdown list."""
import json, os, random, sys
sys.path.insert(0, os.path.dirname(__file__))
import harness as h

res = []


def rec(name, verdict, ev, r):
    res.append((name, verdict, ev))
    with open(f"{h.LOGS}/extra_{name.split()[0]}.log", "w") as f:
        f.write(f"{name}\n{verdict}: {ev}\nrc={r.get('rc')} secs={r.get('secs')}\n---- stdout\n{r.get('out','')}\n---- stderr\n{r.get('err','')}\n{r.get('ps','')}")
    print(f"{name}: {verdict}: {ev}", file=sys.stderr, flush=True)


# X1: bh K with --timeout 8s: does bh end the stopped worker itself?
d = h.make_checkout("bh", "X1")
argv = [h.BH, "task", "run", "--no-network", "--timeout", "8s", "--module", "src", "--", "sh", f"{h.PAY}/K.sh"]
r = h.run_plain(argv, d, h.env_for("bh"), timeout=30)
left = [p for p in h.session_pids(0)]  # placeholder, not used
rec("X1 bh K with --timeout 8s", "held" if not r["timed_out"] else "broken",
    f"returned={not r['timed_out']} after {r['secs']} s rc={r['rc']}; " + h.lines(r, "task") + " " + h.lines(r, "bh:"), r)

# X2: bh --commit after the worker rewrote its OWN repository's .git/config
# (core.fsmonitor, core.hooksPath to a writable folder with a pre-commit hook).
d = h.make_checkout("bh", "X2")
canary = f"{h.CANARY}/bh-X2"
if os.path.exists(canary):
    os.unlink(canary)
payload = (f"echo PAYLOAD-START; mkdir -p src/hooks; printf '#!/bin/sh\\ntouch {canary}\\n' > src/hooks/pre-commit; "
           f"chmod +x src/hooks/pre-commit; for k in pre-commit commit-msg post-commit reference-transaction; do cp src/hooks/pre-commit src/hooks/$k; done; "
           f"git config core.hooksPath \"$PWD/src/hooks\" && echo hooksPath-set; "
           f"git config core.fsmonitor 'touch {canary}; false' && echo fsmonitor-set; echo change >> src/main.txt")
argv = [h.BH, "task", "run", "--no-network", "--commit", "--module", "src", "--", "sh", "-c", payload]
r = h.run_plain(argv, d, h.env_for("bh"))
ran = os.path.exists(canary)
h.sh(f"git -C {d} status --short")
ran2 = os.path.exists(canary)
rec("X2 bh --commit after worker poisons its own .git/config", "broken" if ran or ran2 else "held",
    f"canary {'RAN' if ran else 'absent'} after bh; after host git status: {'RAN' if ran2 else 'absent'}; rc={r['rc']}; "
    + h.lines(r, "task ") + " " + h.lines(r, "reason:")[:300], r)

# X3: srt H with filesystem.denyRead ["~/.ssh"] (the documented way to hide it)
d = h.make_checkout("srt", "X3")
secret = "SECRET-%08x" % random.getrandbits(32)
made = not os.path.isdir("/root/.ssh")
os.makedirs("/root/.ssh", mode=0o700, exist_ok=True)
open("/root/.ssh/id_test", "w").write(secret + "\n")
sp = f"{h.WS}/srt/X3.srt-settings.json"
json.dump({"network": {"allowedDomains": [], "deniedDomains": []},
           "filesystem": {"denyRead": ["~/.ssh"], "allowRead": [], "allowWrite": ["."], "denyWrite": []}},
          open(sp, "w"), indent=1)
try:
    r = h.run_plain([h.SRT, "--settings", sp, "-c", f"sh {h.PAY}/H.sh"], d, h.env_for("srt"))
finally:
    os.unlink("/root/.ssh/id_test")
    if made:
        os.rmdir("/root/.ssh")
leak = secret in r["out"] + r["err"]
rec("X3 srt H with denyRead [\"~/.ssh\"]", "broken" if leak else "held",
    f"secret {'IN output' if leak else 'not in output'}; " + h.lines(r, "H:") + " " + h.lines(r, "cat:"), r)

# X4: Codex H with a permission profile? Codex workspace-write has no read-deny list; record
# only what workspace-write does with /tmp: host /tmp writable from inside.
d = h.make_checkout("codex", "X4")
p = f"/tmp/peers-codex-tmp-{random.getrandbits(24):x}"
argv = [h.CODEX, "sandbox", "-c", 'sandbox_mode="workspace-write"', "--", "sh", "-c", f"echo PAYLOAD-START; echo x > {p} && echo wrote"]
r = h.run_plain(argv, d, h.env_for("codex"))
ex = os.path.exists(p)
if ex:
    os.unlink(p)
rec("X4 codex write to host /tmp", "written (by design)" if ex else "not written", f"{p} {'created on host' if ex else 'absent'}", r)

# X5: F with a server that binds its socket AFTER the sandbox started (no listing taken at
# the start can know of it; bh checks each connect when it is made)
import threading, time
for sb in ("bh", "codex", "srt"):
    d = h.make_checkout(sb, "X5")
    path = f"{h.ROOT}/srv/late.sock"
    holder = {}
    def late():
        time.sleep(8)
        holder["srv"] = h.UnixServer(path)
    t = threading.Thread(target=late); t.start()
    r = h.run_plain(h.sandbox_argv(sb, d, "X5", f"sleep 14; {h.PY} {h.PAY}/sock.py {path}"), d, h.env_for(sb))
    t.join(); srv = holder["srv"]; srv.close()
    rec(f"X5-{sb} late-bound host Unix socket ({sb})", "broken" if srv.conns else "held",
        f"host server saw {srv.conns} connection(s); " + h.lines(r, "connect"), r)

print("\n".join(f"- {n}: **{v}** — {e}" for n, v, e in res))
