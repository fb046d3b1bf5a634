package io.seckill;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import redis.clients.jedis.Jedis;

/**
 * Throwaway redis-servers for the integration tests: free ports (never 6379), a temporary
 * directory each, stopped by their pid (SIGTERM, then SIGKILL after 10 s). Admin commands go
 * over a plain Jedis connection straight to the node, never through the client under test.
 *
 * <p>The binary is $REDIS_SERVER (default redis-server on the PATH), the module
 * $SECKILL_MODULE (default target/release/libredis_seckill.so of the repository), the
 * library functions/seckill.lua of the repository.
 */
public final class RedisServers implements AutoCloseable {
    static final Path REPO = Path.of(System.getProperty("user.dir")).resolve("../..").normalize();

    /** One running server. */
    public static final class Node {
        public final int port;
        final Path dir;
        final Process process;
        String id;

        Node(int port, Path dir, Process process) {
            this.port = port;
            this.dir = dir;
            this.process = process;
        }

        Jedis admin() {
            return new Jedis("127.0.0.1", port, 10_000);
        }
    }

    final List<Node> nodes = new ArrayList<>();

    public RedisServers() {
        // a test JVM stopped from outside (Surefire's timeout) stops its servers too
        Runtime.getRuntime().addShutdownHook(new Thread(() -> nodes.forEach(n -> n.process.destroy())));
    }

    static String serverBinary() {
        return System.getenv().getOrDefault("REDIS_SERVER", "redis-server");
    }

    static Path module() {
        String env = System.getenv("SECKILL_MODULE");
        Path p = env != null && !env.isEmpty() ? Path.of(env) : REPO.resolve("target/release/libredis_seckill.so");
        if (!Files.exists(p)) {
            throw new IllegalStateException(p + " not found: build the module (make build) or set SECKILL_MODULE");
        }
        return p;
    }

    static String library() throws IOException {
        return Files.readString(REPO.resolve("functions/seckill.lua"));
    }

    /** A server with {@code args} after the common ones. */
    Node start(boolean cluster, String... args) throws IOException {
        int port = freePort(cluster);
        Path dir = Files.createTempDirectory("seckill-java-");
        List<String> cmd = new ArrayList<>(List.of(serverBinary(), "--port", Integer.toString(port),
                "--bind", "127.0.0.1", "--dir", dir.toString(), "--logfile", dir.resolve("redis.log").toString(),
                "--save", "", "--appendonly", "no", "--daemonize", "no"));
        if (cluster) {
            cmd.addAll(List.of("--cluster-enabled", "yes", "--cluster-config-file",
                    dir.resolve("nodes.conf").toString(), "--cluster-node-timeout", "5000",
                    "--cluster-require-full-coverage", "no"));
        }
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(dir.resolve("stdout.log").toFile()).start();
        Node n = new Node(port, dir, p);
        nodes.add(n);
        waitFor(() -> ping(n), 20_000, "redis-server on " + port + " (" + dir + "/redis.log)");
        return n;
    }

    public Node startWithModule(String... args) throws IOException {
        List<String> a = new ArrayList<>(List.of("--loadmodule", module().toString()));
        a.addAll(List.of(args));
        return start(false, a.toArray(String[]::new));
    }

    /** Three (or n) masters with the module, slots spread by redis-cli --cluster create. */
    List<Node> startCluster(int masters) throws IOException, InterruptedException {
        List<Node> c = new ArrayList<>();
        for (int i = 0; i < masters; i++) {
            c.add(start(true, "--loadmodule", module().toString()));
        }
        List<String> cmd = new ArrayList<>(List.of("redis-cli", "--cluster", "create"));
        c.forEach(n -> cmd.add("127.0.0.1:" + n.port));
        cmd.addAll(List.of("--cluster-replicas", "0", "--cluster-yes"));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IllegalStateException("redis-cli --cluster create failed");
        }
        for (Node n : c) {
            waitFor(() -> {
                try (Jedis j = n.admin()) {
                    return j.clusterInfo().contains("cluster_state:ok")
                            && j.clusterNodes().lines().filter(l -> l.contains("master")).count() == masters;
                }
            }, 30_000, "cluster_state:ok on " + n.port);
            try (Jedis j = n.admin()) {
                n.id = j.clusterMyId();
            }
        }
        return c;
    }

    /** Loads functions/seckill.lua on the node (FUNCTION LOAD REPLACE). */
    static void loadLibrary(Node n) throws IOException {
        try (Jedis j = n.admin()) {
            j.functionLoadReplace(library());
        }
    }

    /** errorstat_PREFIX counts summed over {@code nodes} (INFO errorstats). */
    static long errors(List<Node> nodes, String prefix) {
        long sum = 0;
        for (Node n : nodes) {
            try (Jedis j = n.admin()) {
                for (String line : j.info("errorstats").split("\r?\n")) {
                    if (line.startsWith("errorstat_" + prefix + ":count=")) {
                        sum += Long.parseLong(line.substring(line.indexOf('=') + 1).split(",")[0]);
                    }
                }
            }
        }
        return sum;
    }

    static void resetStats(List<Node> nodes) {
        for (Node n : nodes) {
            try (Jedis j = n.admin()) {
                j.configResetStat();
            }
        }
    }

    static Map<String, String> info(Node n, String section) {
        Map<String, String> out = new java.util.LinkedHashMap<>();
        try (Jedis j = n.admin()) {
            for (String line : j.info(section).split("\r?\n")) {
                int i = line.indexOf(':');
                if (i > 0 && !line.startsWith("#")) {
                    out.put(line.substring(0, i), line.substring(i + 1));
                }
            }
        }
        return out;
    }

    /** What the node says it is: "redis 8.2.3" or "valkey 8.1.1". */
    static String version(Node n) {
        Map<String, String> i = info(n, "server");
        String valkey = i.get("valkey_version");
        return valkey != null ? "valkey " + valkey : "redis " + i.get("redis_version");
    }

    private static boolean ping(Node n) {
        if (!n.process.isAlive()) {
            throw new IllegalStateException("redis-server on " + n.port + " exited: " + n.dir + "/redis.log");
        }
        try (Jedis j = n.admin()) {
            return "PONG".equals(j.ping());
        } catch (RuntimeException e) {
            return false;
        }
    }

    static void waitFor(BooleanSupplier ok, long timeoutMs, String what) {
        long deadline = System.nanoTime() + timeoutMs * 1_000_000;
        while (true) {
            try {
                if (ok.getAsBoolean()) {
                    return;
                }
            } catch (RuntimeException e) {
                if (e instanceof IllegalStateException) {
                    throw e;
                }
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out waiting for " + what);
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted waiting for " + what);
            }
        }
    }

    /** A port nobody listens on; for a cluster node its bus port (+10000) too. */
    private static int freePort(boolean cluster) throws IOException {
        for (int i = 0; i < 1000; i++) {
            int port = 20000 + ThreadLocalRandom.current().nextInt(35000);
            if (bindable(port) && (!cluster || bindable(port + 10000))) {
                return port;
            }
        }
        throw new IOException("no free port found in 1000 tries");
    }

    private static boolean bindable(int port) {
        try (ServerSocket s = new ServerSocket(port, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.isBound();
        } catch (IOException e) {
            return false;
        }
    }

    @Override
    public void close() {
        for (Node n : nodes) {
            n.process.destroy();   // SIGTERM to the pid
        }
        for (Node n : nodes) {
            try {
                if (!n.process.waitFor(10, TimeUnit.SECONDS)) {
                    n.process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            try (Stream<Path> files = Files.walk(n.dir)) {
                files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (IOException e) {
                // a leftover temp dir is harmless
            }
        }
        nodes.clear();
    }
}
