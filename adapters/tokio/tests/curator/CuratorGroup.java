// Curator 5.4's GroupMember next to ours (tests/curator/group.rs): joins group <dir> as
// <id> with <data>, prints JOINED, then MEMBERS <id>=<data>,... (sorted) each time its
// getCurrentMembers() changes. Commands on stdin: "leave" closes the member (LEFT),
// "join" joins again (JOINED). Runs until killed. Session timeout 1 s.
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.retry.RetryNTimes;

public class CuratorGroup {
    static volatile GroupMember member;

    static GroupMember join(CuratorFramework client, String dir, String id, String data) {
        GroupMember m = new GroupMember(client, dir, id, data.getBytes(StandardCharsets.UTF_8));
        m.start();
        return m;
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String dir = args[1];
        String id = args[2];
        String data = args[3];
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(connect)
            .sessionTimeoutMs(1000)
            .connectionTimeoutMs(10000)
            .retryPolicy(new RetryNTimes(100, 100))
            .build();
        client.start();
        client.blockUntilConnected();
        member = join(client, dir, id, data);
        // JOINED once the member node is on the server, as ours reports `created`.
        while (client.checkExists().forPath(dir + "/" + id) == null) {
            Thread.sleep(10);
        }
        System.out.println("JOINED");
        Thread commands = new Thread(() -> {
            java.util.Scanner in = new java.util.Scanner(System.in);
            while (in.hasNextLine()) {
                String c = in.nextLine().trim();
                try {
                    if (c.equals("leave")) {
                        GroupMember m = member;
                        member = null;
                        m.close();
                        System.out.println("LEFT");
                    } else if (c.equals("join")) {
                        member = join(client, dir, id, data);
                        System.out.println("JOINED");
                    }
                } catch (Exception e) {
                    System.out.println("ERROR " + e);
                }
            }
        });
        commands.setDaemon(true);
        commands.start();
        String last = "";
        while (true) {
            GroupMember m = member;
            if (m != null) {
                StringBuilder line = new StringBuilder();
                for (Map.Entry<String, byte[]> e : new TreeMap<>(m.getCurrentMembers()).entrySet()) {
                    if (line.length() > 0) {
                        line.append(',');
                    }
                    line.append(e.getKey()).append('=')
                        .append(new String(e.getValue(), StandardCharsets.UTF_8));
                }
                if (!line.toString().equals(last)) {
                    last = line.toString();
                    System.out.println("MEMBERS " + last);
                }
            }
            Thread.sleep(20);
        }
    }
}
