# kazoo's NonBlockingLease (Debian's python3-kazoo, 2.8), for the interop tests.
# Usage: kazoo_lease.py <connect>; prints READY once connected, then reads one command
# a line on stdin:
#   try <path> <identifier> <seconds>  ->  GRANTED <record> | REFUSED <record>
# (<record>: <path>/lease_holder's data after the attempt), and `quit`.
import datetime
import sys

from kazoo.client import KazooClient


def main():
    zk = KazooClient(hosts=sys.argv[1], timeout=10.0)
    zk.start(timeout=15)
    print("READY", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        path, ident, secs = cmd[1], cmd[2], float(cmd[3])
        lease = zk.NonBlockingLease(path, datetime.timedelta(seconds=secs), identifier=ident)
        raw, _ = zk.get(path + "/lease_holder")
        print("%s %s" % ("GRANTED" if lease else "REFUSED", raw.decode("utf-8")), flush=True)
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
