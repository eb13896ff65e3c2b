"""The file-system calls of each backend operation of a server binary, counted.

    python3 tests/tools/syscalls.py target/release/hegemony-state [STATE_BYTES]

Starts the binary's `serve` on a fresh data folder under `strace -f -ttt` (fsync, fdatasync,
openat, rename, pwrite64 only), runs lock -> read -> write (?ID=) -> unlock cycles of a
Terraform-shaped state of STATE_BYTES (10240 by default) on one connection, times each
request, and counts the calls that fall inside each request's time, as a mean over the cycles
after two warm-up ones. Needs strace (Debian's `strace` package).
"""

import base64
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

CALLS = "fsync,fdatasync,openat,rename,renameat,renameat2,pwrite64"
WARM_UP, CYCLES = 2, 6


def state(serial, size):
    """A state of `size` bytes or a little more: terraform_data instances, as count makes them."""
    doc = {"version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": "l1",
           "outputs": {}, "resources": []}
    i = 0
    while len(json.dumps(doc)) < size:
        doc["resources"].append({
            "mode": "managed", "type": "terraform_data", "name": f"p{i}",
            "provider": 'provider["terraform.io/builtin/terraform"]',
            "instances": [{"attributes": {"id": f"{i:08x}-{serial}",
                                          "input": {"value": f"v{i}-" + "ab" * 40, "type": "string"}}}],
        })
        i += 1
    return json.dumps(doc).encode()


def main():
    binary = sys.argv[1]
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 10240
    folder = tempfile.mkdtemp(prefix="syscalls-")
    data = os.path.join(folder, "data")
    env = dict(os.environ, RUST_LOG="info",
               HEGEMONY_TF_STATE_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
    made = subprocess.run([binary, "token", "create", "--org", "acme", "--user", "alice",
                           "--role", "operator", "--data-dir", data],
                          capture_output=True, text=True, env=env, check=True)
    token = made.stdout.strip().splitlines()[-1].strip()
    trace = os.path.join(folder, "trace")
    tracer = subprocess.Popen(
        ["strace", "-f", "-ttt", "-e", f"trace={CALLS}", "-o", trace,
         binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    address, deadline = None, time.time() + 60
    while address is None and time.time() < deadline:
        found = re.search(r"listening on http://(\S+)", tracer.stderr.readline())
        address = found and found.group(1)
    if address is None:
        sys.exit("the server did not start")
    threading.Thread(target=lambda: [None for _ in tracer.stderr], daemon=True).start()
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port))
    auth = "Basic " + base64.b64encode(f"x:{token}".encode()).decode()

    def call(method, path, body=None, headers=None):
        conn.request(method, path, body=body, headers={"Authorization": auth, **(headers or {})})
        answer = conn.getresponse()
        answer.read()
        if answer.status != 200:
            sys.exit(f"{method} {path}: {answer.status}")

    spans = []
    for cycle in range(WARM_UP + CYCLES):
        lock_id = f"lock-{cycle}"
        lock = json.dumps({"ID": lock_id, "Operation": "OperationTypeApply", "Info": "",
                           "Who": "a@h", "Version": "1.11.4", "Created": "2026-12-01T00:00:00Z"})
        body = state(cycle + 1, size)
        steps = [("LOCK", lambda: call("LOCK", "/api/tf-states/net/lock", lock)),
                 ("GET", lambda: cycle and call("GET", "/api/tf-states/net/state", None,
                                                {"Accept-Encoding": "gzip"})),
                 ("POST", lambda: call("POST", f"/api/tf-states/net/state?ID={lock_id}", body)),
                 ("UNLOCK", lambda: call("UNLOCK", "/api/tf-states/net/lock", lock))]
        for name, step in steps:
            time.sleep(0.2)  # keeps the sweeper's and other background calls apart
            start = time.time()
            step()
            if cycle >= WARM_UP:
                spans.append((name, start, time.time()))
    time.sleep(0.3)
    server = subprocess.run(["pgrep", "-P", str(tracer.pid)], capture_output=True, text=True)
    os.kill(int(server.stdout.split()[0]), 15)
    tracer.wait()
    calls = []
    for line in open(trace):
        parts = line.split(None, 2)
        named = len(parts) == 3 and re.match(r"(\w+)\(", parts[2])
        if named:
            calls.append((float(parts[1]), named.group(1)))
    counts = {}
    for name, start, end in spans:
        for at, call_name in calls:
            if start <= at <= end:
                per = counts.setdefault(name, {})
                per[call_name] = per.get(call_name, 0) + 1
    print(f"{os.path.basename(binary)}, {size}-byte state, calls per request (mean of {CYCLES}):")
    for name in ["LOCK", "GET", "POST", "UNLOCK"]:
        seen = counts.get(name, {})
        print(f"  {name:7s}", ", ".join(f"{k}={v / CYCLES:g}" for k, v in sorted(seen.items())) or "none")


if __name__ == "__main__":
    main()
