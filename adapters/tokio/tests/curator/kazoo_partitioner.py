# kazoo's SetPartitioner (Debian's python3-kazoo, 2.8), for the interop test and the bench.
# Usage: kazoo_partitioner.py <connect> <path> <items,...> <time_boundary_s> <session_s> <id>...
# Runs one member per <id> (one client each), kazoo's documented loop: releases when
# told, waits while allocating. Prints "ACQUIRED <id> <item,...>" each time a member's
# share is held, "RELEASED <id>" after a release_set; on the line "finish" from stdin
# finishes every member (release, leave the party) and prints "FINISHED".
import sys
import threading
import time

from kazoo.client import KazooClient


def main():
    connect, path = sys.argv[1], sys.argv[2]
    items = [i for i in sys.argv[3].split(",") if i]
    boundary, session = float(sys.argv[4]), float(sys.argv[5])
    ids = sys.argv[6:]
    finish = threading.Event()

    def stdin():
        for line in sys.stdin:
            if line.strip() == "finish":
                break
        finish.set()

    threading.Thread(target=stdin, daemon=True).start()
    members = []
    for ident in ids:
        zk = KazooClient(hosts=connect, timeout=session)
        zk.start(timeout=15)
        part = zk.SetPartitioner(path, set=items, identifier=ident, time_boundary=boundary)
        members.append([ident, zk, part, None])
    print("JOINED", flush=True)
    while not finish.is_set():
        for m in members:
            ident, zk, part, seen = m
            if part.failed:
                print("FAILED %s" % ident, flush=True)
                return 1
            elif part.release:
                part.release_set()
                print("RELEASED %s" % ident, flush=True)
            elif part.acquired and seen != part.state_id:
                m[3] = part.state_id
                print("ACQUIRED %s %s" % (ident, ",".join(sorted(part))), flush=True)
        time.sleep(0.005)
    for ident, zk, part, seen in members:
        part.finish()
        zk.stop()
        zk.close()
    print("FINISHED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
