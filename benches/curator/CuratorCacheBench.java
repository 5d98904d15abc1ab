// Apache Curator 5.4's CuratorCache on an existing subtree, for benches/cache.rs.
// Usage: CuratorCacheBench <connect> <root> <changes> <path-of-changed-node>...
//   Loads the subtree into a CuratorCache (time to `initialized`), measures the heap it
//   holds per cached node (used heap after full GCs, before and after the load), then a
//   second client sets the data of the listed nodes (all at once, in the background) and
//   the time until the cache has reported every change is measured.
//   Prints one line: RESULT <nodes> <load ms> <heap bytes per node> <changes per second>
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.retry.RetryOneTime;

public class CuratorCacheBench {
    static long used() {
        Runtime rt = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) {
            System.gc();
            try { Thread.sleep(50); } catch (InterruptedException e) { }
        }
        return rt.totalMemory() - rt.freeMemory();
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        CuratorFramework writer = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        writer.start();
        writer.blockUntilConnected();
        String root = args[1];
        List<String> changed = Files.readAllLines(Paths.get(args[2]));
        CountDownLatch init = new CountDownLatch(1);
        CountDownLatch changes = new CountDownLatch(changed.size());
        CuratorCache cache = CuratorCache.build(client, root);
        cache.listenable().addListener(CuratorCacheListener.builder()
            .forInitialized(init::countDown)
            .forChanges((before, after) -> changes.countDown())
            .build());
        long before = used();
        long t0 = System.nanoTime();
        cache.start();
        if (!init.await(120, TimeUnit.SECONDS)) throw new RuntimeException("not initialized");
        long loadNs = System.nanoTime() - t0;
        long nodes = cache.size();
        long perNode = (used() - before) / Math.max(1, nodes);
        long t1 = System.nanoTime();
        for (String p : changed) {
            writer.setData().inBackground().forPath(p, "changed-by-curator-bench-0000000".getBytes());
        }
        if (!changes.await(120, TimeUnit.SECONDS)) throw new RuntimeException("changes missed");
        double perSec = changed.size() / ((System.nanoTime() - t1) / 1e9);
        System.out.println("RESULT " + nodes + " " + (loadNs / 1000000) + " " + perNode + " " + Math.round(perSec));
        System.out.flush();
        cache.close();
        writer.close();
        client.close();
    }
}
