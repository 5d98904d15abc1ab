"""kazoo's `Counter` next to ours in `benches/counter.rs` (run by it, not by hand).

Usage: kazoo_counter.py HOSTS PATH CLIENTS EACH. Starts CLIENTS `KazooClient`s (one
session each), reads the counter once on each (kazoo creates the node), prints READY,
waits for a line on stdin, then runs EACH increments per client, one thread per client,
all at once; prints `RESULT <ms> <final value>`, waits for a line on stdin, and stops.
Prints `SKIP <why>` and exits 0 when kazoo is not installed (`pip install kazoo`).
"""

import sys
import threading
import time

try:
    from kazoo.client import KazooClient
except ImportError as e:  # the bench goes on without this row
    print(f"SKIP kazoo is not installed ({e}); `pip install kazoo`", flush=True)
    sys.exit(0)


def main():
    hosts, path, clients, each = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    zks = [KazooClient(hosts=hosts) for _ in range(clients)]
    for zk in zks:
        zk.start()
    counters = [zk.Counter(path) for zk in zks]
    for c in counters:
        _ = c.value
    print("READY", flush=True)
    sys.stdin.readline()

    start = threading.Barrier(clients + 1)

    def run(c):
        start.wait()
        for _ in range(each):
            c += 1

    threads = [threading.Thread(target=run, args=(c,)) for c in counters]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join()
    ms = (time.monotonic() - t0) * 1000.0
    print(f"RESULT {ms:.0f} {counters[0].value}", flush=True)
    sys.stdin.readline()
    for zk in zks:
        zk.stop()
        zk.close()


if __name__ == "__main__":
    main()
