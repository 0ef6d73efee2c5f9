#!/usr/bin/env python3
"""Run attacks A-M against bh, Codex's Linux sandbox and sandbox-runtime (srt),
checking every effect on the host afterwards. Prints a markdown table.

Usage: harness.py [--sandboxes none,bh,codex,srt] [--attacks A,B,...]
Logs: $BH_PEERS_DIR/logs/<sandbox>_<attack>.log ; results: $BH_PEERS_DIR/results.json
"""
import argparse, errno, fcntl, hashlib, json, os, pty, random, select, shutil, signal
import socket, stat, subprocess, sys, termios, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# Scratch (checkouts, logs, npm installs); outside /tmp, which bh's sandbox replaces.
ROOT = os.environ.get("BH_PEERS_DIR", "/var/tmp/bh-peers")
PAY = f"{HERE}/payloads"
WS = f"{ROOT}/ws"
LOGS = f"{ROOT}/logs"
CANARY = f"{ROOT}/canary"
STATE = f"{ROOT}/state"
BH = os.environ.get("BH_BIN", f"{REPO}/target/debug/bh")
CODEX = f"{ROOT}/npm/node_modules/.bin/codex"
SRT = f"{ROOT}/npm/node_modules/.bin/srt"
PY = "/usr/bin/python3"
TIMEOUT = 60


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, **kw)


def sha(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except FileNotFoundError:
        return None


def make_checkout(sb, attack):
    d = f"{WS}/{sb}/{attack}"
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(f"{d}/src")
    with open(f"{d}/README", "w") as f:
        f.write("test repo\n")
    with open(f"{d}/src/main.txt", "w") as f:
        f.write("hello\n")
    for c in ("git init -q", "git config user.email peers@example.invalid",
              "git config user.name peers", "git add -A", "git commit -qm init"):
        subprocess.run(c, shell=True, cwd=d, check=True)
    return d


# ---------------------------------------------------------------- sandboxes

def sandbox_argv(sb, d, attack, shell_cmd, extra=None):
    """argv that runs shell_cmd (a /bin/sh string) in sandbox sb from checkout d."""
    extra = extra or {}
    if sb == "none":
        return ["sh", "-c", shell_cmd]
    if sb == "bh":
        argv = [BH, "task", "run", "--no-network", "--module", "src"]
        for w in extra.get("allow_write", []):
            argv += ["--allow-write", w]
        argv += extra.get("bh_flags", [])
        return argv + ["--", "sh", "-c", shell_cmd]
    if sb == "codex":
        # (-C/--cd is only accepted together with --permission-profile; cwd is the checkout)
        argv = [CODEX, "sandbox",
                "-c", 'sandbox_mode="workspace-write"',
                "-c", "sandbox_workspace_write.network_access=false"]
        roots = [os.path.join(d, w) for w in extra.get("allow_write", [])]
        if roots:
            argv += ["-c", "sandbox_workspace_write.writable_roots=" + json.dumps(roots)]
        return argv + ["--", "sh", "-c", shell_cmd]
    if sb == "srt":
        settings = {
            "network": {"allowedDomains": [], "deniedDomains": []},
            "filesystem": {"denyRead": [], "allowRead": [],
                           "allowWrite": ["."] + extra.get("allow_write", []),
                           "denyWrite": []},
        }
        sp = f"{WS}/{sb}/{attack}.srt-settings.json"
        with open(sp, "w") as f:
            json.dump(settings, f, indent=1)
        return [SRT, "--settings", sp, "-c", shell_cmd]
    raise ValueError(sb)


def env_for(sb):
    env = dict(os.environ)
    env["BH_STATE_DIR"] = STATE
    env.pop("XDG_RUNTIME_DIR", None)
    return env


def run_plain(argv, cwd, env, timeout=TIMEOUT, pass_fds=()):
    t0 = time.time()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, pass_fds=pass_fds)
    timed_out = False
    ps_snapshot = ""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        ps_snapshot = session_ps(p.pid)
        kill_session(p.pid)
        out, err = p.communicate(timeout=30)
    return dict(rc=p.returncode, out=out.decode(errors="replace"),
                err=err.decode(errors="replace"), secs=round(time.time() - t0, 1),
                timed_out=timed_out, ps=ps_snapshot)


def session_pids(sid):
    pids = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat") as f:
                s = f.read()
            fields = s[s.rindex(")") + 2:].split()
            if int(fields[3]) == sid:  # field 6 = session
                pids.append(int(e))
        except (OSError, ValueError):
            pass
    return pids


def descendants(pid):
    """pid and all its descendants (by ppid), to catch processes that left the session."""
    kids = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/stat") as f:
                    s = f.read()
                ppid = int(s[s.rindex(")") + 2:].split()[1])
                kids.setdefault(ppid, []).append(int(e))
            except (OSError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        x = todo.pop()
        out.append(x)
        todo += kids.get(x, [])
    return out


def session_ps(sid):
    pids = sorted(set(session_pids(sid)) | set(descendants(sid)))
    if not pids:
        return ""
    return sh("ps -o pid,ppid,pgid,sid,stat,comm -p " + ",".join(map(str, pids))).stdout


def kill_session(sid):
    pids = set(session_pids(sid)) | set(descendants(sid))
    for p in pids:
        for s in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.kill(p, s)
            except OSError:
                pass


def run_pty(argv, cwd, env, timeout=TIMEOUT):
    """Run argv with a fresh pty as controlling terminal; return output and whatever
    is left in the terminal's input queue afterwards."""
    master, slave = pty.openpty()
    slave_name = os.ttyname(slave)
    t0 = time.time()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(master)
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
            for fd in (0, 1, 2):
                os.dup2(slave, fd)
            if slave > 2:
                os.close(slave)
            os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    out = b""
    status = None
    deadline = time.time() + timeout
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
                out += chunk
            except OSError:
                pass
        wp, st = os.waitpid(pid, os.WNOHANG)
        if wp:
            status = st
            break
    timed_out = status is None
    if timed_out:
        kill_session(pid)
        _, status = os.waitpid(pid, 0)
    # drain remaining output
    while True:
        r, _, _ = select.select([master], [], [], 0.3)
        if not r:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    # now read the terminal's pending INPUT from the slave side (what was "typed")
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~(termios.ICANON | termios.ECHO)
    attrs[6][termios.VMIN] = 0
    attrs[6][termios.VTIME] = 0
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    pending = b""
    fl = fcntl.fcntl(slave, fcntl.F_GETFL)
    fcntl.fcntl(slave, fcntl.F_SETFL, fl | os.O_NONBLOCK)
    while True:
        try:
            chunk = os.read(slave, 4096)
        except OSError:
            break
        if not chunk:
            break
        pending += chunk
    os.close(master)
    os.close(slave)
    return dict(rc=os.waitstatus_to_exitcode(status), out=out.decode(errors="replace"),
                err="", secs=round(time.time() - t0, 1), timed_out=timed_out,
                pending=pending.decode(errors="replace"), tty=slave_name)


# ---------------------------------------------------------------- host servers

class UnixServer:
    def __init__(self, path):
        self.path, self.conns, self.data = path, 0, b""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.bind(path)
        self.s.listen(5)
        self.s.settimeout(0.2)
        self.stop = False
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop:
            try:
                c, _ = self.s.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns += 1
            c.settimeout(1)
            try:
                self.data += c.recv(100)
            except OSError:
                pass
            c.close()

    def close(self):
        time.sleep(0.5)
        self.stop = True
        self.t.join()
        self.s.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class TcpServer(UnixServer):
    def __init__(self):
        self.conns, self.data = 0, b""
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.s.bind(("127.0.0.1", 0))
        self.port = self.s.getsockname()[1]
        self.path = None
        self.s.listen(5)
        self.s.settimeout(0.2)
        self.stop = False
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def close(self):
        time.sleep(0.5)
        self.stop = True
        self.t.join()
        self.s.close()


# ---------------------------------------------------------------- attacks

def started(r):
    return "PAYLOAD-START" in r["out"] or "PAYLOAD-START" in r["err"]


def lines(r, prefix):
    txt = r["out"] + "\n" + r["err"]
    return "; ".join(l.strip() for l in txt.splitlines() if l.strip().startswith(prefix))[:300]


def devices_under(*dirs):
    found = []
    for top in dirs:
        for dp, dns, fns in os.walk(top):
            for n in dns + fns:
                p = os.path.join(dp, n)
                try:
                    m = os.lstat(p).st_mode
                except OSError:
                    continue
                if stat.S_ISBLK(m) or stat.S_ISCHR(m):
                    found.append(p)
    return found


def attack(sb, a):
    """returns (verdict, evidence, run-record)"""
    env = env_for(sb)
    d = make_checkout(sb, a)
    canary = f"{CANARY}/{sb}-{a}"
    os.makedirs(CANARY, exist_ok=True)
    for p in (canary,):
        if os.path.exists(p):
            os.unlink(p)
    extra = {}
    r = None

    if a == "A":
        before = sha(f"{d}/.git/config")
        r = run_plain(sandbox_argv(sb, d, a, f"sh {PAY}/A.sh {d} {canary}"), d, env)
        changed = sha(f"{d}/.git/config") != before
        # simulate the user's next git command in the checkout
        sh(f"git -C {d} status --short")
        ran = os.path.exists(canary)
        if not started(r):
            return refused_or_failed(r)
        v = "broken" if changed or ran else "held"
        ev = f"host .git/config {'CHANGED' if changed else 'unchanged'}; fsmonitor canary {'RAN on host' if ran else 'absent'}; payload: {lines(r, 'A:')}"
        return v, ev, r

    if a == "B":
        hook = f"{d}/.git/hooks/pre-commit"
        r = run_plain(sandbox_argv(sb, d, a, f"sh {PAY}/B.sh {d} {canary}"), d, env)
        exists = os.path.exists(hook)
        ran = os.path.exists(canary)
        if not started(r):
            return refused_or_failed(r)
        v = "broken" if exists or ran else "held"
        ev = f"host hook {'EXISTS' if exists else 'absent'}; canary {'RAN' if ran else 'absent'}; payload: {lines(r, 'B:')}"
        return v, ev, r

    if a == "C":
        r = run_plain(sandbox_argv(sb, d, a, f"sh {PAY}/C.sh {d}"), d, env)
        devs = devices_under(d, STATE) if os.path.isdir(STATE) else devices_under(d)
        for p in devs:
            os.unlink(p)
        if not started(r):
            return refused_or_failed(r)
        v = "broken" if devs else "held"
        ev = f"device nodes on host: {devs or 'none'}; payload: {lines(r, 'C:')}"
        return v, ev, r

    if a == "D":
        r = run_pty(sandbox_argv(sb, d, a, f"{PY} {PAY}/D.py"), d, env)
        pend = r["pending"]
        if not started(r):
            return refused_or_failed(r)
        v = "broken" if "PWNED" in pend else "held"
        ev = f"pty input queue after run: {pend!r}; payload: {lines(r, 'D:')}"
        return v, ev, r

    if a == "E":
        log = f"{ROOT}/inherited.log"
        with open(log, "w") as f:
            f.write("")
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        if fd != 5:
            os.dup2(fd, 5)
            os.close(fd)
        try:
            r = run_plain(sandbox_argv(sb, d, a, f"sh {PAY}/E.sh"), d, env, pass_fds=(5,))
        finally:
            os.close(5)
        content = open(log).read()
        if not started(r):
            return refused_or_failed(r)
        v = "broken" if "LEAK" in content else "held"
        ev = f"inherited.log: {content.strip()!r}; payload: {lines(r, 'E: write')}"
        return v, ev, r

    if a in ("F", "G"):
        path = f"{ROOT}/srv/editor.sock" if a == "F" else "/run/user/0/bus-test"
        srv = UnixServer(path)
        try:
            r = run_plain(sandbox_argv(sb, d, a, f"{PY} {PAY}/sock.py {path}"), d, env)
        finally:
            srv.close()
        if not started(r):
            return refused_or_failed(r)
        v = "broken" if srv.conns else "held"
        ev = f"host server saw {srv.conns} connection(s) {srv.data!r}; payload: {lines(r, 'connect')}"
        return v, ev, r

    if a == "H":
        secret = "SECRET-%08x" % random.getrandbits(32)
        made_dir = not os.path.isdir("/root/.ssh")
        os.makedirs("/root/.ssh", mode=0o700, exist_ok=True)
        with open("/root/.ssh/id_test", "w") as f:
            f.write(secret + "\n")
        os.chmod("/root/.ssh/id_test", 0o600)
        try:
            r = run_plain(sandbox_argv(sb, d, a, f"sh {PAY}/H.sh"), d, env)
        finally:
            os.unlink("/root/.ssh/id_test")
            if made_dir:
                os.rmdir("/root/.ssh")
        if not started(r):
            return refused_or_failed(r)
        leaked = secret in r["out"] or secret in r["err"]
        v = "broken" if leaked else "held"
        txt = (r["out"] + r["err"]).replace(secret, "<SECRET>")
        cat = "; ".join(l.strip() for l in txt.splitlines() if "id_test" in l or "SECRET" in l or "H: cat" in l)[:250]
        ev = f"secret {'IN output' if leaked else 'not in output'}; {cat}"
        return v, ev, r

    if a == "I":
        q = sh("ipcmk -Q").stdout.strip()
        qid = q.split(":")[-1].strip()
        try:
            r = run_plain(sandbox_argv(sb, d, a, f"sh {PAY}/I.sh {qid}"), d, env)
            alive = any(l.split()[1:2] == [qid] for l in sh("ipcs -q").stdout.splitlines())
        finally:
            sh(f"ipcrm -q {qid}")
        if not started(r):
            return refused_or_failed(r)
        v = "held" if alive else "broken"
        ev = f"host queue {qid} {'still exists' if alive else 'REMOVED'}; payload: {lines(r, 'I: ipcrm')}"
        return v, ev, r

    if a == "J":
        srv = TcpServer()
        try:
            r = run_plain(sandbox_argv(sb, d, a, f"{PY} {PAY}/J.py {srv.port}"), d, env)
        finally:
            srv.close()
        if not started(r):
            return refused_or_failed(r)
        ext_ok = "connect ok 1.1.1.1" in r["out"] + r["err"]
        v = "broken" if srv.conns or ext_ok else "held"
        ev = f"host 127.0.0.1:{srv.port} listener saw {srv.conns} connection(s); 1.1.1.1 (payload's word): {'connected' if ext_ok else 'failed'}; {lines(r, 'J:')}"
        return v, ev, r

    if a == "K":
        r = run_plain(sandbox_argv(sb, d, a, f"sh {PAY}/K.sh"), d, env, timeout=15)
        if not started(r) and not r["timed_out"]:
            return refused_or_failed(r)
        if r["timed_out"]:
            procs = [l.split() for l in r["ps"].splitlines()[1:]]
            top = procs[0] if procs else ["?"] * 6
            stopped = [p for p in procs if p[4].startswith("T")]
            ev = (f"did NOT return within 15 s (killed by harness); sandbox CLI {top[5]} state {top[4]}"
                  f" ({'stopped' if top[4].startswith('T') else 'not stopped, waiting'}); stopped: "
                  + ", ".join(f"{p[5]}({p[0]})" for p in stopped))
            return "broken", ev, r
        ev = f"returned after {r['secs']} s, rc={r['rc']}; {'K: resumed printed' if 'K: resumed' in r['out'] else ''}"
        return "held", ev, r

    if a == "L":
        out = f"{ROOT}/outside.txt"
        if os.path.exists(out):
            os.unlink(out)
        r = run_plain(sandbox_argv(sb, d, a, f"sh {PAY}/L.sh {out}"), d, env)
        ex = os.path.exists(out)
        if ex:
            os.unlink(out)
        if not started(r):
            return refused_or_failed(r)
        v = "broken" if ex else "held"
        ev = f"{ROOT}/outside.txt {'CREATED' if ex else 'absent'}; payload: {lines(r, 'L:')}"
        return v, ev, r

    if a == "M":
        os.symlink(".git/hooks", f"{d}/cache")
        hook = f"{d}/.git/hooks/pre-commit"
        extra = {"allow_write": ["cache"]}
        r = run_plain(sandbox_argv(sb, d, a, f"sh {PAY}/M.sh {d} {canary}", extra), d, env)
        exists = os.path.exists(hook)
        if not started(r):
            v, ev, r = refused_or_failed(r)
            if exists:
                return "broken", "hook exists although the payload never started: " + ev, r
            return v, ev, r
        v = "broken" if exists else "held"
        ev = f"host .git/hooks/pre-commit {'EXISTS' if exists else 'absent'}; payload: {lines(r, 'M: write')}"
        return v, ev, r

    raise ValueError(a)


def refused_or_failed(r):
    msg = (r["err"].strip().splitlines() or r["out"].strip().splitlines() or [""])
    msg = " | ".join(msg[-3:])[:300]
    if r["rc"] != 0:
        return "refused up front", f"rc={r['rc']}: {msg}", r
    return "n/a", f"payload did not start, rc=0: {msg}", r


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sandboxes", default="none,bh,codex,srt")
    ap.add_argument("--attacks", default="ABCDEFGHIJKLM")
    ap.add_argument("--results", default=f"{ROOT}/results.json")
    args = ap.parse_args()
    os.makedirs(LOGS, exist_ok=True)
    sbs = args.sandboxes.split(",")
    atts = [x for x in args.attacks if x.strip(",")]
    try:
        results = json.load(open(args.results))
    except (OSError, ValueError):
        results = {}
    for a in atts:
        for sb in sbs:
            try:
                v, ev, r = attack(sb, a)
            except Exception as e:  # harness trouble, record it
                v, ev, r = "error", f"harness error: {e!r}", {}
            results.setdefault(a, {})[sb] = {"verdict": v, "evidence": ev}
            with open(f"{LOGS}/{sb}_{a}.log", "w") as f:
                f.write(json.dumps({"sandbox": sb, "attack": a, "verdict": v, "evidence": ev}, indent=1) + "\n")
                for k in ("rc", "secs", "timed_out", "tty", "pending"):
                    if k in r:
                        f.write(f"{k}: {r[k]!r}\n")
                f.write("---- stdout\n" + r.get("out", "") + "\n---- stderr\n" + r.get("err", "") + "\n")
                if r.get("ps"):
                    f.write("---- ps at timeout\n" + r["ps"])
            print(f"{a} {sb:6} {v:17} {ev}", file=sys.stderr, flush=True)
    with open(args.results, "w") as f:
        json.dump(results, f, indent=1)
    print_table(results, sbs)


NAMES = {"A": "write .git/config", "B": "plant .git/hooks/pre-commit", "C": "mknod block device",
         "D": "TIOCSTI into terminal", "E": "write inherited fd 5", "F": "host Unix socket outside the project",
         "G": "host Unix socket /run/user/0", "H": "read ~/.ssh/id_test", "I": "ipcrm host msg queue",
         "J": "network 1.1.1.1 / host 127.0.0.1", "K": "kill -STOP 0", "L": "write outside the project",
         "M": "write via granted symlink cache -> .git/hooks"}
COLS = {"none": "no sandbox (control)", "bh": "bh", "codex": "Codex", "srt": "sandbox-runtime"}


def print_table(results, sbs):
    print("| attack | " + " | ".join(COLS[s] for s in sbs) + " |")
    print("|---|" + "---|" * len(sbs))
    for a in sorted(results):
        row = [results[a].get(s, {}).get("verdict", "-") for s in sbs]
        print(f"| {a}. {NAMES[a]} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
