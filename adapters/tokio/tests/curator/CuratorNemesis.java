// Apache Curator's InterProcessMutex and LeaderLatch as clients of the nemesis runs
// (tests/adapters/nemesis.rs), speaking the same lines as our clients
// (zk_recipes_testing::nemesis): parameters in the environment (NEMESIS_ROLE lock or
// election, NEMESIS_CONNECT, NEMESIS_PATH, NEMESIS_SESSION_MS, NEMESIS_SEED,
// NEMESIS_CLIENT), reports on stdout, the fenced store's verdicts and `stop` on stdin.
//
// Curator's rule, as its documentation gives it: a lock holder watches the connection
// state and stops acting on SUSPENDED until RECONNECTED, and on LOST the lock is gone
// (InterProcessMutex's docs: "If a LOST state is reported it is certain that you no
// longer hold the lock"; isAcquiredInThisProcess() keeps saying true, so the holder
// must remember it); a
// LeaderLatch's hasLeadership() turns false on SUSPENDED and LOST (the default error
// policy). The fencing token is our node's creation zxid, read after the acquisition
// (Curator has none of its own).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Collection;
import java.util.Random;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.data.Stat;

public class CuratorNemesis {
    static volatile boolean stopped = false;
    static final LinkedBlockingQueue<Boolean> verdicts = new LinkedBlockingQueue<>();
    /** The hold we act for (null: none) and whether the connection allows acting. */
    static volatile String tenure = null;
    static volatile boolean connected = true;
    /** LOST was heard while holding: the hold is over, whatever the mutex says. */
    static volatile boolean lost = false;
    static Random rng;

    static long now() {
        return ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now());
    }

    static synchronized void report(String line) {
        System.out.println("nemesis: " + line);
        System.out.flush();
    }

    static long between(long lo, long hi) {
        return lo + (long) (rng.nextDouble() * (hi - lo + 1));
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** One act checked at `checked`: work a little, the fenced write, done. */
    static void act(String t, long token, long checked) throws InterruptedException {
        sleep(between(10, 50));
        report("act " + t + " " + token + " " + checked);
        if (verdicts.poll(60, TimeUnit.SECONDS) == null) {
            report("error no verdict from the fenced store");
        }
        report("acted " + t + " " + now());
        sleep(between(0, 60));
    }

    static long czxid(CuratorFramework client, String path) throws Exception {
        Stat stat = client.checkExists().forPath(path);
        if (stat == null) {
            throw new IllegalStateException("our node is gone: " + path);
        }
        return stat.getCzxid();
    }

    public static void main(String[] args) throws Exception {
        String role = System.getenv("NEMESIS_ROLE");
        String path = System.getenv("NEMESIS_PATH");
        int session = Integer.parseInt(System.getenv("NEMESIS_SESSION_MS"));
        String me = "c" + System.getenv("NEMESIS_CLIENT");
        rng = new Random(Long.parseLong(System.getenv("NEMESIS_SEED")));
        Thread input = new Thread(() -> {
            try {
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
                String line;
                while ((line = in.readLine()) != null) {
                    switch (line.trim()) {
                        case "stop": stopped = true; break;
                        case "ok": verdicts.add(true); break;
                        case "refused": verdicts.add(false); break;
                        default: break;
                    }
                }
            } catch (Exception e) {
                // stdin closed: the runner is gone
            }
        });
        input.setDaemon(true);
        input.start();
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(System.getenv("NEMESIS_CONNECT"))
                .sessionTimeoutMs(session)
                .connectionTimeoutMs(session)
                .retryPolicy(new ExponentialBackoffRetry(100, 10, 1000))
                .build();
        client.getConnectionStateListenable().addListener((c, state) -> {
            String t = tenure;
            if (state == ConnectionState.SUSPENDED || state == ConnectionState.LOST) {
                connected = false;
                if (state == ConnectionState.LOST) {
                    lost = true;
                }
                if (t != null) {
                    report("heard " + t + " " + (state == ConnectionState.LOST ? "lost" : "suspended") + " " + now());
                }
            } else if (state == ConnectionState.RECONNECTED) {
                if (t != null) {
                    report("heard " + t + " reconnected " + now());
                }
                connected = true;
            }
        });
        client.start();
        if (!client.blockUntilConnected(60, TimeUnit.SECONDS)) {
            report("error connect: not connected in 60 s");
            return;
        }
        report("ready");
        if (role.equals("lock")) {
            lock(client, path, me);
        } else if (role.equals("election")) {
            election(client, path, me);
        } else {
            report("error unknown role " + role);
        }
        client.close();
        report("done " + now());
        System.exit(0);
    }

    static void lock(CuratorFramework client, String path, String me) throws Exception {
        int n = 0;
        while (!stopped) {
            InterProcessMutex mutex = new InterProcessMutex(client, path);
            boolean got;
            try {
                got = mutex.acquire(between(300, 2500), TimeUnit.MILLISECONDS);
            } catch (Exception e) {
                sleep(100);
                continue;
            }
            if (!got) {
                continue;
            }
            long token;
            try {
                // The holder is the first participant: our node.
                Collection<String> nodes = mutex.getParticipantNodes();
                token = czxid(client, nodes.iterator().next());
            } catch (Exception e) {
                try {
                    mutex.release();
                } catch (Exception ignored) {
                    // lost already
                }
                continue;
            }
            n++;
            String t = me + "." + n;
            connected = client.getZookeeperClient().isConnected();
            lost = false;
            tenure = t;
            report("held " + t + " " + token + " " + now());
            long left = rng.nextBoolean() ? between(3, 20) : between(100, 250);
            while (left > 0 && !stopped && !lost) {
                long checked = now();
                if (connected && !lost && mutex.isAcquiredInThisProcess()) {
                    act(t, token, checked);
                    left--;
                } else {
                    sleep(50);
                }
            }
            tenure = null;
            if (lost) {
                report("ended " + t + " lost " + now());
                try {
                    mutex.release();
                } catch (Exception ignored) {
                    // the node went with the session
                }
                continue;
            }
            try {
                mutex.release();
                report("ended " + t + " released " + now());
            } catch (Exception e) {
                report("ended " + t + " failed " + now());
            }
        }
    }

    static void election(CuratorFramework client, String path, String me) throws Exception {
        LeaderLatch latch = new LeaderLatch(client, path, me);
        latch.start();
        String t = null;
        long token = 0;
        while (!stopped) {
            boolean led;
            try {
                led = latch.await(between(300, 1500), TimeUnit.MILLISECONDS);
            } catch (Exception e) {
                sleep(100);
                continue;
            }
            if (!led) {
                if (t != null) {
                    report("ended " + t + " lost " + now());
                    t = null;
                    tenure = null;
                }
                continue;
            }
            long now;
            try {
                now = czxid(client, latch.getOurPath());
            } catch (Exception e) {
                continue;
            }
            if (t != null && now != token) {
                report("ended " + t + " lost " + now());
                t = null;
            }
            if (t == null) {
                token = now;
                t = me + "." + token;
                tenure = t;
                report("held " + t + " " + token + " " + now());
            }
            long left = rng.nextBoolean() ? between(3, 20) : between(100, 250);
            while (left > 0 && !stopped && t != null) {
                long checked = now();
                if (latch.hasLeadership()) {
                    act(t, token, checked);
                    left--;
                } else {
                    report("ended " + t + " lost " + now());
                    t = null;
                    tenure = null;
                }
            }
            if (t != null) {
                // Enough: stand down and join again at the back of the line.
                tenure = null;
                latch.close();
                report("ended " + t + " released " + now());
                t = null;
                latch = new LeaderLatch(client, path, me);
                latch.start();
            }
        }
        tenure = null;
        latch.close();
        if (t != null) {
            report("ended " + t + " released " + now());
        }
    }
}
