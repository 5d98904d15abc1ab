"""kazoo's `SetPartitioner` next to ours in `benches/partitioner.rs` (run by it, not by hand).

Usage: kazoo_partitioner.py HOSTS PATH ITEMS MEMBERS TIME_BOUNDARY_S. Starts MEMBERS
members (one `KazooClient` each, each running kazoo's documented loop in a thread of its
own: `release_set` when told, `wait_for_acquire` while allocating) dividing the ITEMS
items `item-0000`...; prints READY once every member holds its share. Then reads
commands from stdin:
  join   one more member (its client connected beforehand) joins; prints
         `RESULT <ms>` once every member holds its share of the new division (from the
         join to the last member's ACQUIRED)
  leave  that member finishes; prints LEFT once the others hold theirs again
  quit   everyone finishes; prints DONE
Prints `SKIP <why>` and exits 0 when kazoo is not installed.
"""

import sys
import threading
import time

try:
    from kazoo.client import KazooClient
except ImportError as e:  # the bench goes on without this row
    print(f"SKIP kazoo is not installed ({e}); `apt-get install python3-kazoo`", flush=True)
    sys.exit(0)


class Member:
    def __init__(self, zk, path, items, ident, boundary):
        self.part = zk.SetPartitioner(path, set=items, identifier=ident, time_boundary=boundary)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        part = self.part
        while not self.stop.is_set():
            if part.failed:
                return
            elif part.release:
                part.release_set()
            elif part.acquired:
                part.state_change_event.clear()
                if part.acquired:
                    part.state_change_event.wait(0.05)
            else:
                part.wait_for_acquire(0.05)

    def holds(self, n):
        p = self.part
        return p.acquired and len(p._partition_set) == n

    def finish(self):
        self.stop.set()
        self.thread.join()
        self.part.finish()


def wait_shares(members, total):
    n = len(members)
    while True:
        if all(m.holds(total // n + (1 if i < total % n else 0))
               for i, m in enumerate(sorted(members, key=lambda m: m.part._identifier))):
            return
        time.sleep(0.001)


def main():
    hosts, path, total, n, boundary = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                       int(sys.argv[4]), float(sys.argv[5]))
    items = ["item-%04d" % i for i in range(total)]
    clients = []

    def client():
        zk = KazooClient(hosts=hosts, timeout=10.0)
        zk.start(timeout=15)
        clients.append(zk)
        return zk

    members = [Member(client(), path, items, "m%02d" % i, boundary) for i in range(n)]
    wait_shares(members, total)
    print("READY", flush=True)
    joined = None
    rounds = 0
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "join":
            zk = client()
            rounds += 1
            t0 = time.monotonic()
            joined = Member(zk, path, items, "z%02d" % rounds, boundary)
            wait_shares(members + [joined], total)
            print("RESULT %.3f" % ((time.monotonic() - t0) * 1e3), flush=True)
        elif cmd == "leave":
            joined.finish()
            joined = None
            wait_shares(members, total)
            print("LEFT", flush=True)
        elif cmd == "quit":
            break
    for m in members:
        m.finish()
    for zk in clients:
        zk.stop()
        zk.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
