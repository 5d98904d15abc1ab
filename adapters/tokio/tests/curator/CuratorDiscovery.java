// Curator 5.4's ServiceDiscovery next to ours (tests/curator/discovery.rs): registers the
// instance "java-1" of service "web" under the base path, follows "web" with a
// ServiceCache and prints, one line each: READY; SAW <fields> when the instance
// "rust-1" appears; GONE when it vanishes. Runs until killed.
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.x.discovery.ServiceCache;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.UriSpec;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;

public class CuratorDiscovery {
    @SuppressWarnings({"unchecked", "rawtypes"})
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String base = args[1];
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(connect)
            .sessionTimeoutMs(2000)
            .connectionTimeoutMs(10000)
            .retryPolicy(new RetryNTimes(100, 100))
            .build();
        client.start();
        client.blockUntilConnected();
        Map<String, Object> payload = new HashMap<>();
        payload.put("lang", "java");
        payload.put("n", 7);
        ServiceInstance<Map> me = ServiceInstance.<Map>builder()
            .name("web")
            .id("java-1")
            .address("10.1.1.1")
            .port(7070)
            .sslPort(7443)
            .payload(payload)
            .uriSpec(new UriSpec("{scheme}://{address}:{ssl-port}/j"))
            .build();
        ServiceDiscovery<Map> discovery = ServiceDiscoveryBuilder.builder(Map.class)
            .client(client)
            .basePath(base)
            .serializer(new JsonInstanceSerializer<>(Map.class))
            .thisInstance(me)
            .build();
        discovery.start();
        ServiceCache<Map> cache = discovery.serviceCacheBuilder().name("web").build();
        cache.start();
        System.out.println("READY");
        boolean seen = false;
        while (true) {
            ServiceInstance<Map> rust = null;
            for (ServiceInstance<Map> i : cache.getInstances()) {
                if (i.getId().equals("rust-1")) {
                    rust = i;
                }
            }
            if (rust != null && !seen) {
                seen = true;
                System.out.println("SAW name=" + rust.getName() + " id=" + rust.getId()
                    + " address=" + rust.getAddress() + " port=" + rust.getPort()
                    + " sslPort=" + rust.getSslPort()
                    + " payload=" + new TreeMap<String, Object>(rust.getPayload())
                    + " time=" + rust.getRegistrationTimeUTC()
                    + " type=" + rust.getServiceType() + " enabled=" + rust.isEnabled()
                    + " uri=" + rust.buildUriSpec());
            }
            if (rust == null && seen) {
                System.out.println("GONE");
                seen = false;
            }
            Thread.sleep(20);
        }
    }
}
