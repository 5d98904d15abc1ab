# kazoo's Lock (Debian's python3-kazoo, 2.8), for the interop tests.
# Usage: kazoo_lock.py <connect> <path> <marker> <rounds>
# Takes the lock <rounds> times; while holding it creates the ephemeral node <marker>
# (which exists only while someone holds the lock: finding it there means two holders),
# waits a little, deletes it and releases. Prints VIOLATION <n> for each round that
# found the marker taken, then DONE <rounds>.
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError


def main():
    connect, path, marker, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    zk = KazooClient(hosts=connect, timeout=10.0)
    zk.start(timeout=15)
    lock = zk.Lock(path, "kazoo")
    for n in range(rounds):
        with lock:
            try:
                zk.create(marker, b"kazoo", ephemeral=True, makepath=True)
            except NodeExistsError:
                print("VIOLATION %d" % n, flush=True)
                continue
            time.sleep(0.01)
            zk.delete(marker)
    print("DONE %d" % rounds, flush=True)
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
