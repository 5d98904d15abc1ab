// Apache Curator's shared counters on a path, for the counter interop test.
// Usage: CuratorCounter <connect> <path> shared|atomic <n>
//   shared: SharedCount (4-byte big-endian int), atomic: DistributedAtomicLong (8 bytes)
//   Prints READY once connected (the counter started), waits for a line on stdin, then
//   increments n times (retrying lost races), prints "VALUES v1 v2 ..." (the value each
//   of its increments wrote) and exits.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.retry.RetryOneTime;

public class CuratorCounter {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        String path = args[1];
        boolean shared = args[2].equals("shared");
        int n = Integer.parseInt(args[3]);
        List<Long> values = new ArrayList<>();
        SharedCount count = null;
        DistributedAtomicLong atomic = null;
        if (shared) {
            count = new SharedCount(client, path, 0);
            count.start();
        } else {
            atomic = new DistributedAtomicLong(client, path, new RetryNTimes(10000, 1));
        }
        System.out.println("READY");
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        for (int i = 0; i < n; i++) {
            if (shared) {
                while (true) {
                    VersionedValue<Integer> v = count.getVersionedValue();
                    if (count.trySetCount(v, v.getValue() + 1)) {
                        values.add((long) (v.getValue() + 1));
                        break;
                    }
                }
            } else {
                while (true) {
                    AtomicValue<Long> r = atomic.increment();
                    if (r.succeeded()) {
                        values.add(r.postValue());
                        break;
                    }
                }
            }
        }
        StringBuilder line = new StringBuilder("VALUES");
        for (long v : values) line.append(' ').append(v);
        System.out.println(line);
        System.out.flush();
        if (count != null) count.close();
        client.close();
    }
}
