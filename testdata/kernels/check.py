#!/usr/bin/env python3
"""Checks the console of testdata/kernels/run.sh's guest strictly; prints PASS/FAIL lines.

Usage: check.py CONSOLE QEMU_RC KVER CGBASE POD1 CID1 POD2 CID2. Exits 1 on any failure.
"""
import json
import re
import sys

console, qemu_rc, kver, cgbase, pod1, cid1, pod2, cid2 = sys.argv[1:9]
# the console has CR LF line ends and the firmware's terminal escapes (ESC c, ESC [...) in
# front of the guest's lines
text = re.sub(r"\x1b(\[[0-9;?]*[A-Za-z]|c)", "", open(console, errors="replace").read().replace("\r", ""))
failed = []
passed = []


def check(ok, what, seen=""):
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not seen else "  (seen: %s)" % seen))
    if ok:
        passed.append(what)
    else:
        failed.append(what)


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
    return b is not None, out


kv = dict(re.findall(r"^==== kv ([a-z_0-9]+)=(.*)$", text, re.M))
ns = lambda s: int(re.fullmatch(r"net:\[(\d+)\]", s or "").group(1)) if re.fullmatch(r"net:\[(\d+)\]", s or "") else None

check(qemu_rc == "0", "qemu exited 0 (no timeout, guest powered off)", qemu_rc)
check("==== guest done" in text, "guest ran to the end")
check(kv.get("uname") == kver, "guest runs kernel " + kver, kv.get("uname"))
check("verifier" not in text.lower(), "no verifier message on the console")
for run in ("1", "2"):
    check(kv.get("eaddr_exit_" + run) == "0", "run %s: eaddr exited 0" % run, kv.get("eaddr_exit_" + run))
    err = block("stderr", run) or ""
    check("msg=attached" in err, "run %s: eaddr attached" % run, err[-300:])
    st = re.search(r"msg=stopped .*", err)
    check(bool(st) and " lost=0 " in st.group(0) + " ", "run %s: eaddr stopped, lost=0" % run, st and st.group(0))

# run 1: two bind() failures, each from a pod cgroup removed right after its process exited
path1 = "/%s/kubepods/besteffort/pod%s/%s" % (cgbase, pod1, cid1)
path2 = "/%s/kubepods/burstable/pod%s/%s" % (cgbase, pod2, cid2)
check(kv.get("bindfail_1") == "0" and kv.get("bindfail_2") == "0", "both bind() calls failed with EADDRNOTAVAIL",
      "%s %s" % (kv.get("bindfail_1"), kv.get("bindfail_2")))
check(kv.get("removed_1") == path1 and kv.get("removed_2") == path2 and kv.get("cgroups_left") == "0",
      "both cgroups removed after their process exited", "%s %s" % (kv.get("removed_1"), kv.get("cgroups_left")))
found, ev1 = events("1")
check(found, "run 1: events printed between markers")
fails = [e for e in ev1 if e.get("kind") == "failure"]
check(len(fails) == 2 and len(ev1) == 2, "run 1: exactly two failure events", "%d events" % len(ev1))
want = [(path1, pod1, cid1, "besteffort", ns(kv.get("netns_init"))), (path2, pod2, cid2, "burstable", ns(kv.get("netns_2")))]
for i, (path, uid, cid, qos, netns) in enumerate(want):
    e = fails[i] if i < len(fails) else {}
    n = "run 1 event %d: " % (i + 1)
    check(e.get("syscall") == "bind" and e.get("errno") == "EADDRNOTAVAIL", n + "bind EADDRNOTAVAIL", e.get("errno"))
    check(e.get("local") == {"ip": "192.0.2.1", "port": 4242}, n + "local 192.0.2.1:4242", e.get("local"))
    check(e.get("process", {}).get("comm") == "bindfail", n + "comm bindfail", e.get("process"))
    check(e.get("cgroup", {}).get("path") == path, n + "cgroup.path of the removed cgroup", e.get("cgroup"))
    pod = e.get("pod", {})
    check(pod.get("uid") == uid, n + "pod.uid", pod.get("uid"))
    check(pod.get("container_id") == cid, n + "pod.container_id", pod.get("container_id"))
    check(pod.get("qos") == qos, n + "pod.qos " + qos, pod.get("qos"))
    check(netns is not None and e.get("netns") == netns, n + "netns as the guest read it", "%s vs %s" % (e.get("netns"), netns))
if len(fails) == 2:
    check(fails[0].get("netns") != fails[1].get("netns"), "run 1: the second event's netns differs from the first's")

# run 2: --nodeport-collisions loads and reports a loopback connect from a port in 30000-30011
found, ev2 = events("2")
check(found, "run 2: events printed between markers")
np = [e for e in ev2 if e.get("kind") == "nodeport_collision" and e.get("syscall") == "connect"
      and e.get("remote") == {"ip": "127.0.0.1", "port": 8080}
      and 30000 <= e.get("local", {}).get("port", 0) <= 30011]
check(len(np) == 1, "run 2: one nodeport_collision event (connect 127.0.0.1:8080 from 30000-30011)", ev2)

print("test-kernels: %d passed, %d failed" % (len(passed), len(failed)))
sys.exit(1 if failed else 0)
