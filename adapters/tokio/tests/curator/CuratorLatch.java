// Apache Curator's LeaderLatch on a path, driven line by line, for the interop test.
// Usage: CuratorLatch <connect> <path> <participant id>
// Starts the latch, prints READY, then answers one line per command read on stdin:
//   await <ms>    LEADER or WAITING (LeaderLatch.await with a timeout)
//   has           true|false (hasLeadership)
//   leader        <id> <isLeader> (getLeader, read from the server)
//   participants  <id>,<id>,... (getParticipants, in Curator's order)
//   path          our node's path (getOurPath)
//   close         CLOSED (LeaderLatch.close), then exits
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLatch {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        LeaderLatch latch = new LeaderLatch(client, args[1], args[2]);
        latch.start();
        System.out.println("READY");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] cmd = line.trim().split(" ");
            switch (cmd[0]) {
                case "await":
                    boolean led = latch.await(Long.parseLong(cmd[1]), TimeUnit.MILLISECONDS);
                    System.out.println(led ? "LEADER" : "WAITING");
                    break;
                case "has":
                    System.out.println(latch.hasLeadership());
                    break;
                case "leader":
                    Participant p = latch.getLeader();
                    System.out.println(p.getId() + " " + p.isLeader());
                    break;
                case "participants":
                    List<String> ids = new ArrayList<>();
                    for (Participant q : latch.getParticipants()) {
                        ids.add(q.getId());
                    }
                    System.out.println(String.join(",", ids));
                    break;
                case "path":
                    System.out.println(latch.getOurPath());
                    break;
                case "close":
                    latch.close();
                    System.out.println("CLOSED");
                    System.out.flush();
                    client.close();
                    return;
                default:
                    System.out.println("UNKNOWN " + line);
            }
            System.out.flush();
        }
        latch.close();
        client.close();
    }
}
