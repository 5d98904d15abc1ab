// Apache Curator 5.4's InterProcessMultiLock over 3 paths, for benches/multi_lock.rs.
// Usage: CuratorMultiLockBench <connect> <dir> <warm-up> <cycles>
//   One client (session), one InterProcessMultiLock over <dir>/a, <dir>/b, <dir>/c
//   (one InterProcessMutex each); <warm-up> acquire + release cycles, then READY; on a
//   line from stdin, <cycles> cycles in a row, each timed: RESULT <cycles> <elapsed ns>
//   <median ns> <p90 ns>; closes on another line.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.retry.RetryOneTime;

public class CuratorMultiLockBench {
    public static void main(String[] args) throws Exception {
        String dir = args[1];
        int warmUp = Integer.parseInt(args[2]);
        int cycles = Integer.parseInt(args[3]);
        CuratorFramework c = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        c.start();
        c.blockUntilConnected();
        InterProcessMultiLock lock =
            new InterProcessMultiLock(c, Arrays.asList(dir + "/a", dir + "/b", dir + "/c"));
        for (int i = 0; i < warmUp; i++) {
            lock.acquire();
            lock.release();
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("READY");
        System.out.flush();
        in.readLine();
        List<Long> times = new ArrayList<>();
        long t0 = System.nanoTime();
        for (int i = 0; i < cycles; i++) {
            long t = System.nanoTime();
            lock.acquire();
            lock.release();
            times.add(System.nanoTime() - t);
        }
        long elapsed = System.nanoTime() - t0;
        Collections.sort(times);
        System.out.println("RESULT " + cycles + " " + elapsed + " " + times.get(cycles / 2)
            + " " + times.get(cycles * 9 / 10));
        System.out.flush();
        in.readLine();
        c.close();
    }
}
