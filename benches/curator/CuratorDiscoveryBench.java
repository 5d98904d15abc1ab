// Curator 5.4's side of benches/discovery.rs: a second client registers an instance
// (ServiceDiscovery.registerService), the time until our ServiceCache lists it; then
// unregistered, until it is gone. Then 10 instances and 10,000 ServiceProvider
// lookups (round robin), between the lines PICKS and PICKED (the bench reads the
// server's request count around them; the bench answers GO on standard input).
// Prints: REACH <median ms> <p90 ms>.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.x.discovery.ServiceCache;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceProvider;
import org.apache.curator.x.discovery.details.ServiceCacheListener;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.x.discovery.strategies.RoundRobinStrategy;

public class CuratorDiscoveryBench {
    static CuratorFramework client(String connect) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(connect, new RetryNTimes(10, 100));
        c.start();
        c.blockUntilConnected();
        return c;
    }

    static final Object CHANGED = new Object();

    // Waits for the cache's next change (at most 1 ms, then looks again).
    static void pause() throws InterruptedException {
        synchronized (CHANGED) {
            CHANGED.wait(1);
        }
    }

    static boolean has(ServiceCache<Void> cache, String id) {
        for (ServiceInstance<Void> i : cache.getInstances()) {
            if (i.getId().equals(id)) {
                return true;
            }
        }
        return false;
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String base = args[1];
        int rounds = Integer.parseInt(args[2]);
        ServiceDiscovery<Void> ours = ServiceDiscoveryBuilder.builder(Void.class)
            .client(client(connect)).basePath(base).build();
        ours.start();
        ServiceDiscovery<Void> other = ServiceDiscoveryBuilder.builder(Void.class)
            .client(client(connect)).basePath(base).build();
        other.start();
        ServiceCache<Void> cache = ours.serviceCacheBuilder().name("web").build();
        cache.addListener(new ServiceCacheListener() {
            public void cacheChanged() {
                synchronized (CHANGED) {
                    CHANGED.notifyAll();
                }
            }

            public void stateChanged(CuratorFramework c, ConnectionState s) {}
        });
        cache.start();
        List<Long> reach = new ArrayList<>();
        for (int k = 0; k < rounds; k++) {
            ServiceInstance<Void> i = ServiceInstance.<Void>builder()
                .name("web").id("j" + k).address("10.0.0.1").port(8080).build();
            long start = System.nanoTime();
            other.registerService(i);
            while (!has(cache, i.getId())) {
                pause();
            }
            reach.add(System.nanoTime() - start);
            other.unregisterService(i);
            while (has(cache, i.getId())) {
                pause();
            }
        }
        Collections.sort(reach);
        System.out.printf("REACH %.2f %.2f%n", reach.get(rounds / 2) / 1e6,
            reach.get(Math.min(rounds - 1, rounds * 90 / 100)) / 1e6);
        for (int k = 0; k < 10; k++) {
            other.registerService(ServiceInstance.<Void>builder()
                .name("web").id("n" + k).address("10.0.0.2").port(9000 + k).build());
        }
        ServiceProvider<Void> provider = ours.serviceProviderBuilder()
            .serviceName("web").providerStrategy(new RoundRobinStrategy<>()).build();
        provider.start();
        while (provider.getAllInstances().size() < 10) {
            Thread.sleep(10);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("PICKS");
        in.readLine();
        long start = System.nanoTime();
        for (int k = 0; k < 10000; k++) {
            if (provider.getInstance() == null) {
                throw new IllegalStateException("no instance");
            }
        }
        System.out.printf("PICKED %.1f%n", (System.nanoTime() - start) / 1e6);
        in.readLine();
    }
}
