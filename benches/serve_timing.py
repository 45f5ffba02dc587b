#!/usr/bin/env python3
"""Response times of `recsel serve` by outcome (docs/serving.md, "Timing"): charged answers,
refusals (budget exhausted) and replays (a request id answered before), interleaved on one
keep-alive connection to 127.0.0.1, on the small synthetic model.

Usage: benches/serve_timing.py RECSEL [ROUNDS=1000] [MIN_RESPONSE_MS=0]
Prints the median, p10 and p90 of each outcome in milliseconds and the load average.
"""
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

recsel = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
pad = sys.argv[3] if len(sys.argv) > 3 else "0"
BUDGET = 20  # eps per user; each answer charges 1
with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "m")
    subprocess.run([recsel, "fit", "--dataset", "synthetic", "--out", model], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ids = json.load(open(os.path.join(model, "release.json")))["item_ids"]
    log = open(os.path.join(tmp, "serve.log"), "w+")
    server = subprocess.Popen(
        [recsel, "serve", "--model", model, "--ledger", os.path.join(tmp, "l.db"), "--budget",
         str(BUDGET), "--mech", "mgem", "--eps", "1", "--listen", "127.0.0.1:0",
         "--min-response-ms", pad], stderr=log)
    try:
        addr = None
        for _ in range(600):
            text = open(log.name).read()
            for line in text.splitlines():
                if line.startswith("recsel serve: listening on http://"):
                    addr = line.rsplit("/", 1)[1]
            if addr and "recsel serve: ready" in text:
                break
            time.sleep(0.1)
        else:
            sys.exit(f"recsel serve did not get ready:\n{open(log.name).read()}")
        host, port = addr.split(":")
        conn = http.client.HTTPConnection(host, int(port))
        headers = {"Content-Type": "application/json"}

        def request(user, rid):
            body = json.dumps({"user": user, "history": [ids[3], ids[17], ids[42]],
                               "request_id": rid})
            t = time.perf_counter()
            conn.request("POST", "/v1/recommend", body, headers)
            r = conn.getresponse()
            r.read()
            return r.status, 1e3 * (time.perf_counter() - t)

        for i in range(BUDGET):  # user b's budget is spent
            request("b", f"b{i}")
        times = {"charged": [], "refused": [], "replayed": []}
        want = {"charged": 200, "refused": 429, "replayed": 200}
        for n in range(rounds):
            for kind in times:
                user, rid = {"charged": (f"a{n % 50}", f"a-{n}"), "refused": ("b", f"bx-{n}"),
                             "replayed": ("b", "b0")}[kind]
                status, ms = request(user, rid)
                assert status == want[kind], (kind, status)
                times[kind].append(ms)
        print(f"load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores; "
              f"{rounds} of each, min-response-ms {pad}")
        for kind, v in times.items():
            v.sort()
            print(f"{kind}: median {statistics.median(v):.3f} ms, p10 {v[len(v) // 10]:.3f}, "
                  f"p90 {v[9 * len(v) // 10]:.3f}")
    finally:
        server.terminate()
        server.wait()
