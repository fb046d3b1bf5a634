package io.seckill;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.seckill.Flavour.Api;
import io.seckill.Flavour.Conn;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.util.SafeEncoder;

/**
 * The documented shop role (docs/operations.md, "Who may do what") detects the backend and
 * reserves with nothing more, on the module and on the library, every flavour: the role
 * lines are read from the page (as clients/python/tests/test_roles.py reads them), so the
 * page and the test cannot disagree. The role has no MODULE LIST and no FUNCTION LIST.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RolesTest {
    private final RedisServers servers = new RedisServers();
    private RedisServers.Node mod;
    private RedisServers.Node lib;

    @BeforeAll
    void start() throws Exception {
        mod = servers.startWithModule();
        lib = servers.start(false);
        RedisServers.loadLibrary(lib);
    }

    @AfterAll
    void stop() {
        servers.close();
    }

    static Stream<Arguments> cases() {
        List<Arguments> out = new ArrayList<>();
        for (Flavour f : Flavour.values()) {
            for (Backend b : Backend.values()) {
                out.add(Arguments.of(f, b));
            }
        }
        return out.stream();
    }

    private RedisServers.Node node(Backend b) {
        return b == Backend.MODULE ? mod : lib;
    }

    /** The page's ACL SETUSER line of {@code role} for the backend (the library's have +fcall). */
    static List<String> roleLine(String role, Backend b) throws IOException {
        List<List<String>> found = new ArrayList<>();
        for (String line : Files.readAllLines(RedisServers.REPO.resolve("docs/operations.md"))) {
            if (!line.startsWith("ACL SETUSER ")) {
                continue;
            }
            List<String> words = shellWords(line);
            if (words.get(2).equals(role) && words.contains("+fcall") == (b == Backend.FUNCTIONS)) {
                found.add(words);
            }
        }
        assertEquals(1, found.size(), "docs/operations.md's " + role + " lines for " + b + ": " + found);
        return found.get(0);
    }

    /** Words split on spaces, a double-quoted run one word (the selector "(... +set)"). */
    static List<String> shellWords(String line) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        boolean quoted = false;
        boolean inWord = false;
        for (char ch : line.toCharArray()) {
            if (ch == '"') {
                quoted = !quoted;
                inWord = true;
            } else if (ch == ' ' && !quoted) {
                if (inWord) {
                    out.add(cur.toString());
                    cur.setLength(0);
                }
                inWord = false;
            } else {
                cur.append(ch);
                inWord = true;
            }
        }
        assertTrue(!quoted, "an unclosed quote in " + line);
        if (inWord) {
            out.add(cur.toString());
        }
        return out;
    }

    /** Creates the user of {@code words} (ACL SETUSER ...) as the admin; its password. */
    private static String createUser(RedisServers.Node n, List<String> words) {
        try (Jedis j = n.admin()) {
            j.sendCommand(() -> SafeEncoder.encode("ACL"), words.subList(1, words.size()).toArray(String[]::new));
        }
        return words.stream().filter(w -> w.startsWith(">")).findFirst().orElseThrow().substring(1);
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("cases")
    void theShopDetectsTheBackendAndReserves(Flavour f, Backend b) throws Exception {
        RedisServers.Node n = node(b);
        String password = createUser(n, roleLine("shop", b));
        try (Jedis shop = n.admin()) {
            shop.auth("shop", password);
            JedisDataException e = assertThrows(JedisDataException.class,
                    () -> shop.sendCommand(() -> SafeEncoder.encode("MODULE"), "LIST"));
            assertTrue(e.getMessage().startsWith("NOPERM"), "the shop may run MODULE LIST: " + e.getMessage());
        }
        String key = "sale:{roles-" + f + "-" + b + "}";
        try (Conn admin = Flavour.JEDIS_RESP2.standalone(n.port, SeckillClient.builder().backend(b))) {
            assertTrue(admin.client().sale(key).init(2, new InitOptions().limit(1)));
        }
        try (Conn c = f.standalone(n.port, SeckillClient.builder(), "shop", password)) {
            assertEquals(b, c.client().backend(key), "detected as the shop");
            Api sale = c.sale(key);
            assertEquals(new Reserved(ReserveStatus.RESERVED, "o1", 1), sale.reserve("u1", 1, "o1"));
            assertEquals(new Reserved(ReserveStatus.DUPLICATE, "o1", 1), sale.reserve("u1", 1, "o1"));
            assertEquals(1, sale.info().pending());
        }
    }

    /**
     * A user with no SECKILL right still finds the module (the arity error comes before the
     * ACL); on a server with the library only, a user without FCALL_RO is told to add it.
     */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("cases")
    void aUserWithoutTheRightsIsToldWhichOneToAdd(Flavour f, Backend b) throws Exception {
        RedisServers.Node n = node(b);
        String password = createUser(n, List.of("ACL", "SETUSER", "bare", "reset", "on", ">bare-password", "~sale:*",
                "+ping"));
        try (Conn c = f.standalone(n.port, SeckillClient.builder(), "bare", password)) {
            if (b == Backend.MODULE) {
                assertEquals(Backend.MODULE, c.client().backend("sale:{bare}"));
                return;
            }
            BackendException e = assertThrows(BackendException.class, () -> c.client().backend("sale:{bare}"));
            assertTrue(e.getMessage().contains("+fcall +fcall_ro") && e.getMessage().contains("NOPERM"), e.getMessage());
        }
    }
}
