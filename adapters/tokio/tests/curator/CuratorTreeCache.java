// Curator 5.4's CuratorCache next to our tree cache (tests/curator/cache.rs): caches the
// tree at <root> and prints each event as it is delivered,
//   EVENT <CREATED|CHANGED|DELETED> <path> <czxid> <mzxid> <version> <data>
// (for DELETED, the node as last cached), then INIT once the first load is done. On
// "dump" (stdin) it prints every cached node, NODE <path> <czxid> <mzxid> <version>
// <data>, sorted by path, then END. Runs until its stdin closes.
import java.nio.charset.StandardCharsets;
import java.util.Comparator;
import java.util.Scanner;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.retry.RetryNTimes;

public class CuratorTreeCache {
    static String show(ChildData d) {
        String data = d.getData() == null ? "" : new String(d.getData(), StandardCharsets.UTF_8);
        return d.getPath() + " " + d.getStat().getCzxid() + " " + d.getStat().getMzxid() + " "
            + d.getStat().getVersion() + " " + data;
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(args[0])
            .sessionTimeoutMs(10000)
            .connectionTimeoutMs(10000)
            .retryPolicy(new RetryNTimes(100, 100))
            .build();
        client.start();
        client.blockUntilConnected();
        CuratorCache cache = CuratorCache.build(client, args[1]);
        Object out = new Object();
        cache.listenable().addListener(CuratorCacheListener.builder()
            .forAll((type, old, now) -> {
                synchronized (out) {
                    System.out.println("EVENT " + type.name().replace("NODE_", "") + " "
                        + show(now != null ? now : old));
                }
            })
            .forInitialized(() -> System.out.println("INIT"))
            .build());
        cache.start();
        Scanner in = new Scanner(System.in);
        while (in.hasNextLine()) {
            if (in.nextLine().trim().equals("dump")) {
                synchronized (out) {
                    cache.stream().sorted(Comparator.comparing(ChildData::getPath))
                        .forEach(d -> System.out.println("NODE " + show(d)));
                    System.out.println("END");
                }
            }
        }
        cache.close();
        client.close();
    }
}
