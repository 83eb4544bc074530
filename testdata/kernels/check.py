#!/usr/bin/env python3
"""Judges one entry of make kernels (testdata/kernels/run.sh) from its console; prints PASS/FAIL lines.

Usage: check.py --schemacheck BIN --schema docs/event.schema.json --tests testdata/kernels/tests.txt
                --mode vm|host --tags TAG,... [--lacks FEATURE,...] CONSOLE RC KVER ARCH CGBASE POD1 CID1 POD2 CID2

--tags: the WHERE tags of tests.txt the entry runs. --lacks: what the entry's kernel lacks of eaddr's
needs (run.sh's E_LACKS, in Probe's order); then the scenario is eaddr's refusal, not runs 1 and 2.
Ends with `kernel KVER ARCH: N passed, M failed` and one line per failed check; exits 1 on any failure.
"""
import argparse
import json
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--schemacheck", required=True)
ap.add_argument("--schema", required=True)
ap.add_argument("--tests", required=True)
ap.add_argument("--mode", choices=("vm", "host"), required=True)
ap.add_argument("--tags", required=True)
ap.add_argument("--lacks", default="")
ap.add_argument("args", nargs=9)
a = ap.parse_args()
console, rc, kver, arch, cgbase, pod1, cid1, pod2, cid2 = a.args
vm = a.mode == "vm"
tags = set(a.tags.split(","))
lacks = [f for f in a.lacks.split(",") if f]

# the console has CR LF line ends and the firmware's terminal escapes (ESC c, ESC [...) in
# front of the guest's lines
text = re.sub(r"\x1b(\[[0-9;?]*[A-Za-z]|c)", "", open(console, errors="replace").read().replace("\r", ""))
failed = []
passed = []


def check(ok, what, seen=""):
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not seen else "  (seen: %s)" % str(seen)[:600]))
    # a failed check's summary line carries what was seen too: CI shows only the last lines
    (passed if ok else failed).append(what if ok or not seen else "%s  (seen: %s)" % (what, str(seen)[:300]))


def block(kind, run):
    m = re.search(r"^==== BEGIN %s %s\n(.*?)^==== END %s %s$" % (kind, run, kind, run), text, re.S | re.M)
    return m.group(1) if m else None


def events(run):
    b = block("events", run)
    out = []
    for line in (b or "").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            check(False, "run %s: event line is JSON" % run, line[:200])
    return b, out


kv = dict(re.findall(r"^==== kv ([a-z_0-9]+)=(.*)$", text, re.M))
ns = lambda s: int(re.fullmatch(r"net:\[(\d+)\]", s or "").group(1)) if re.fullmatch(r"net:\[(\d+)\]", s or "") else None
gotest_re = re.compile(r"^==== BEGIN gotest (\S+) (\S+)\n(.*?)^==== END gotest \1 rc=(\d+)", re.S | re.M)
outside = gotest_re.sub("", text)

if vm:
    check(rc == "0", "qemu exited 0 (no timeout, guest powered off)", rc)
    check("==== guest done" in text, "guest ran to the end")
    # the guest kernel's own words when it dies (the console carries them, kernel lines start with
    # a [ seconds ] stamp): the first Oops, BUG or panic line and where it was, to tell a kernel's
    # death from a test's failure at a glance
    died = re.findall(r"^\[ *[0-9.]+\] ((?:Oops|Internal error: Oops|Unable to handle kernel|Kernel panic|general protection fault|BUG: (?:kernel NULL|unable to handle)).*)$", text, re.M)
    rip = re.findall(r"^\[ *[0-9.]+\] (RIP: .*|pc : .*)$", text, re.M) if died else []
    check(not died, "guest kernel: no Oops, BUG or panic", " | ".join(list(dict.fromkeys(died))[:3] + rip[:1]))
else:
    check(rc == "0", "scenario and tests exited 0 (no timeout)", rc)
    check("==== scenario done" in text and "==== gotests done" in text, "scenario and tests ran to the end")
check(kv.get("uname") == kver, "runs kernel " + kver, kv.get("uname"))
if vm:
    # the guest is the production node shape's cgroup setup: v2 only, its root handing the
    # controllers down (TestSystemdDriverCgroups hands them on down its slices)
    check(kv.get("cgroup_mounts") == "cgroup2:/sys/fs/cgroup", "cgroup v2 only: one cgroup2 mount, no v1 hierarchy",
          kv.get("cgroup_mounts"))
    sub = (kv.get("cgroup_subtree") or "").split()
    check("memory" in sub and "pids" in sub, "the cgroup2 root hands controllers down (memory, pids among them)", sub)
check("verifier" not in outside.lower(), "no verifier message outside the Go tests' output")

# ---- run 0: the feature probe without BTF: one line that names it, exit status 1, no event
err0 = (block("stderr", "0") or "").strip().splitlines()
check(kv.get("eaddr_exit_0") == "1", "run 0 (no BTF): eaddr exited 1", kv.get("eaddr_exit_0"))
check(len(err0) == 1 and err0[0].startswith("eaddr: this kernel exposes no BTF at /sys/kernel/btf/vmlinux")
      and "CONFIG_DEBUG_INFO_BTF=y" in err0[0], "run 0 (no BTF): one line on stderr that names BTF", err0)
check(block("events", "0") == "", "run 0 (no BTF): no output on stdout", block("events", "0"))

# ---- the scenario: runs 1 and 2, or eaddr's refusal on a kernel too old for it
def scenario():
    """Runs 1 and 2: attach, EADDRNOTAVAIL and EADDRINUSE from removed pod cgroups, NodePort."""
    for run in ("1", "2"):
        check(kv.get("eaddr_exit_" + run) == "0", "run %s: eaddr exited 0" % run, kv.get("eaddr_exit_" + run))
        err = block("stderr", run) or ""
        check("msg=attached" in err, "run %s: eaddr attached" % run, err[-300:])
        st = re.search(r"msg=stopped .*", err)
        check(bool(st) and " lost=0 " in st.group(0) + " ", "run %s: eaddr stopped, lost=0" % run, st and st.group(0))

    path1 = "/%s/kubepods/besteffort/pod%s/%s" % (cgbase, pod1, cid1)
    path2 = "/%s/kubepods/burstable/pod%s/%s" % (cgbase, pod2, cid2)
    check(kv.get("bindfail_1") == "0" and kv.get("bindfail_2") == "0", "bind() failed with EADDRNOTAVAIL, then EADDRINUSE",
          "%s %s" % (kv.get("bindfail_1"), kv.get("bindfail_2")))
    check(kv.get("removed_1") == path1 and kv.get("removed_2") == path2 and kv.get("cgroups_left") == "0",
          "both cgroups removed after their process exited", "%s %s" % (kv.get("removed_1"), kv.get("cgroups_left")))
    raw1, ev1 = events("1")
    check(raw1 is not None, "run 1: events printed between markers")
    fails = [e for e in ev1 if e.get("kind") == "failure"]
    check(len(fails) == 2 and len(ev1) == 2, "run 1: exactly two failure events", "%d events" % len(ev1))
    want = [(path1, pod1, cid1, "besteffort", ns(kv.get("netns_init")), "EADDRNOTAVAIL", "192.0.2.1"),
            (path2, pod2, cid2, "burstable", ns(kv.get("netns_2")), "EADDRINUSE", "127.0.0.1")]
    for i, (path, uid, cid, qos, netns, errno, ip) in enumerate(want):
        e = fails[i] if i < len(fails) else {}
        n = "run 1 event %d: " % (i + 1)
        check(e.get("syscall") == "bind" and e.get("errno") == errno, n + "bind " + errno, e.get("errno"))
        check(e.get("local") == {"ip": ip, "port": 4242}, n + "local %s:4242" % ip, e.get("local"))
        check(e.get("process", {}).get("comm") == "bindfail", n + "comm bindfail", e.get("process"))
        check(e.get("cgroup", {}).get("path") == path, n + "cgroup.path of the removed cgroup", e.get("cgroup"))
        pod = e.get("pod", {})
        check(pod.get("uid") == uid, n + "pod.uid", pod.get("uid"))
        check(pod.get("container_id") == cid, n + "pod.container_id", pod.get("container_id"))
        check(pod.get("qos") == qos, n + "pod.qos " + qos, pod.get("qos"))
        check(netns is not None and e.get("netns") == netns, n + "netns as the guest read it", "%s vs %s" % (e.get("netns"), netns))
    if len(fails) == 2:
        check(fails[0].get("netns") != fails[1].get("netns"), "run 1: the second event's netns differs from the first's")

    raw2, ev2 = events("2")
    check(raw2 is not None, "run 2: events printed between markers")
    np = [e for e in ev2 if e.get("kind") == "nodeport_collision" and e.get("syscall") == "connect"
          and e.get("remote") == {"ip": "127.0.0.1", "port": 8080}
          and 30000 <= e.get("local", {}).get("port", 0) <= 30011]
    check(len(np) == 1, "run 2: one nodeport_collision event (connect 127.0.0.1:8080 from 30000-30011)", ev2)

    lines = (raw1 or "") + (raw2 or "")
    sc = subprocess.run([a.schemacheck, a.schema], input=lines, capture_output=True, text=True)
    check(sc.returncode == 0, "runs 1 and 2: every event validates against %s" % a.schema, (sc.stdout + sc.stderr).strip())


def refusal():
    """A kernel too old for eaddr: with BTF there, it names the first helper the kernel lacks."""
    err = (block("stderr", "old") or "").strip().splitlines()
    check(kv.get("btf") == "yes", "the kernel exposes BTF (/sys/kernel/btf/vmlinux)", kv.get("btf"))
    check(kv.get("eaddr_exit_old") == "1", "eaddr on this kernel exited 1", kv.get("eaddr_exit_old"))
    want = re.compile(r"eaddr: kernel %s is too old: eaddr needs (?:the (?:helper )?)?%s \(Linux [0-9.]+ or newer; all of eaddr needs [0-9.]+\)$"
                      % (re.escape(kver), re.escape(lacks[0])))
    check(len(err) == 1 and bool(want.match(err[0])), "eaddr on this kernel: one line on stderr that names %s" % lacks[0], err)
    check(block("events", "old") == "", "eaddr on this kernel: no output on stdout", block("events", "old"))
    if err:
        print("refusal on %s: %s" % (kver, err[0]))


if lacks:
    refusal()
else:
    scenario()

# ---- the Go kernel tests tests.txt selects for this architecture
want_tests, left_out = [], []
for line in open(a.tests):
    f = line.split(None, 3)
    if not f or f[0].startswith("#"):
        continue
    pkg, name, where = f[:3]
    why = f[3].strip() if len(f) > 3 else ""
    if tags & set(where.split(",")):
        want_tests.append((pkg, name))
    else:
        left_out.append("%s %s (%s%s)" % (pkg, name, where, ": " + why if why else ""))
results = {}
for m in gotest_re.finditer(text):
    pkg, body, code = m.group(1), m.group(3), m.group(4)
    for st, name in re.findall(r"^--- (PASS|FAIL|SKIP): (\S+)", body, re.M):
        results[(pkg, name)] = st
    results[(pkg, "rc")] = code
ran = []
for pkg, name in want_tests:
    st = results.get((pkg, name), "not run")
    ran.append(name)
    check(st == "PASS", "go test %s -run %s" % (pkg, name), st)
for (pkg, name), st in sorted(results.items()):
    if name != "rc" and (pkg, name) not in want_tests:
        check(False, "go test %s: %s ran but is not selected for %s %s" % (pkg, name, kver, arch), st)
for pkg in sorted({p for p, _ in want_tests}):
    check(results.get((pkg, "rc")) == "0", "go test %s: exit status 0" % pkg, results.get((pkg, "rc"), "not run"))
print("tests run on %s %s: %d (%s)" % (kver, arch, len(ran), " ".join(ran)))
print("tests left out on %s %s: %d%s" % (kver, arch, len(left_out), "".join("\n  " + s for s in left_out)))

# ---- modules: sock_diag's handlers came through the guest's modprobe (request_module)
if vm and any(p == "diagnose/netdiag" for p, _ in want_tests):
    mods = kv.get("modules", "").split()
    check("inet_diag" in mods and "tcp_diag" in mods, "inet_diag and tcp_diag loaded by the kernel through modprobe",
          kv.get("modules"))

print("kernel %s %s: %d passed, %d failed" % (kver, arch, len(passed), len(failed)))
for f in failed:
    print("  failed: " + f)
sys.exit(1 if failed else 0)
