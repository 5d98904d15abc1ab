// Apache Curator's DistributedDoubleBarrier on a path, for the interop test.
// Usage: CuratorDoubleBarrier <connect> <path> <count>
// Reads commands from stdin, one a line, and answers each with one line:
//   enter <ms>  -> ENTERED | NOT_ENTERED | ERROR <exception>
//   leave <ms>  -> LEFT | NOT_LEFT | ERROR <exception>
//   quit
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.retry.RetryOneTime;

public class CuratorDoubleBarrier {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        DistributedDoubleBarrier barrier =
            new DistributedDoubleBarrier(client, args[1], Integer.parseInt(args[2]));
        System.out.println("READY");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] cmd = line.trim().split(" ");
            try {
                if (cmd[0].equals("enter")) {
                    boolean ok = barrier.enter(Long.parseLong(cmd[1]), TimeUnit.MILLISECONDS);
                    System.out.println(ok ? "ENTERED" : "NOT_ENTERED");
                } else if (cmd[0].equals("leave")) {
                    boolean ok = barrier.leave(Long.parseLong(cmd[1]), TimeUnit.MILLISECONDS);
                    System.out.println(ok ? "LEFT" : "NOT_LEFT");
                } else {
                    break;
                }
            } catch (Exception e) {
                System.out.println("ERROR " + e);
            }
            System.out.flush();
        }
        client.close();
    }
}
