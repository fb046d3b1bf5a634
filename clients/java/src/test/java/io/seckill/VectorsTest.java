package io.seckill;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.seckill.jedis.JedisTransport;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.util.RedisInputStream;

/**
 * The shared reply vectors (tests/vectors, recorded from real servers): every case whose
 * parser this client has, read twice, once from the typed tree and once by Jedis's own RESP
 * decoder from the case's exact bytes, must give what the Python reference parser gave.
 * The directory is the system property seckill.vectors (the pom's default:
 * ../../tests/vectors from clients/java).
 */
class VectorsTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final List<String> FILES = List.of("init", "reserve", "settle", "report", "get", "draw",
            "errors", "fence");
    /** Parsers of the split-sale commands this client does not have. */
    private static final Set<String> NOT_HERE = Set.of("send", "recv");

    static Path dir() {
        Path d = Path.of(System.getProperty("seckill.vectors", "../../tests/vectors"));
        assertTrue(Files.isDirectory(d), "no vectors at " + d.toAbsolutePath()
                + ": set -Dseckill.vectors=DIR (tests/vectors of the repository)");
        return d;
    }

    @TestFactory
    Stream<DynamicTest> vectors() throws IOException {
        Path d = dir();
        List<DynamicTest> tests = new ArrayList<>();
        for (String f : FILES) {
            Path p = d.resolve(f + ".json");
            if (!Files.exists(p) && f.equals("fence")) {
                continue;   // written only by a server whose module takes FENCE
            }
            JsonNode cases = JSON.readTree(p.toFile()).get("cases");
            for (JsonNode c : cases) {
                if (NOT_HERE.contains(c.get("parse").asText())) {
                    continue;
                }
                String name = f + ": " + c.get("name").asText() + " [" + c.get("backend").asText()
                        + ", RESP" + c.get("protocol").asText() + "]";
                tests.add(DynamicTest.dynamicTest(name, () -> check(c)));
            }
        }
        assertTrue(tests.size() >= 150, "only " + tests.size() + " vectors found in " + d);
        return tests.stream();
    }

    private static void check(JsonNode c) {
        String parse = c.get("parse").asText();
        JsonNode expect = c.get("expect");
        boolean json = c.get("command").toString().contains("\"FORMAT\",\"JSON\"");
        byte[] raw = c.get("raw").asText().getBytes(StandardCharsets.UTF_8);
        if (parse.equals("error") || expect.has("error")) {
            CommandException e = fromJedis(raw);
            assertEquals(expect.get("error").asText(), e.getMessage());
            assertEquals(expect.get("code").asText(), e.code());
            return;
        }
        Object tree = plain(c.get("reply"));
        Object decoded = JedisTransport.plain(jedisRead(raw));
        assertEquals(expectedValue(parse, expect), parsed(parse, json, tree), "from the typed tree");
        if (parse.equals("report") && !expect.isNull()) {
            assertEquals(new ArrayList<>(((Map<?, ?>) json(expect)).keySet()),
                    new ArrayList<>(((Map<?, ?>) parsed(parse, json, tree)).keySet()), "the fields' order");
        }
        assertEquals(expectedValue(parse, expect), parsed(parse, json, decoded), "from Jedis's decoding of the bytes");
        if (c.get("reply").get("t").asText().equals("map")) {
            assertEquals(expectedValue(parse, expect), parsed(parse, json, asMap(c.get("reply"))), "from a Map");
        }
    }

    /** What the parser makes of a reply, as plain values comparable with {@code expect}. */
    private static Object parsed(String parse, boolean json, Object reply) {
        switch (parse) {
            case "init":
                return Map.of("created", Protocol.parseInit(reply));
            case "reserve": {
                Reserved r = Protocol.parseReserved(reply);
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("status", r.status().name());
                m.put("id", r.id());
                m.put("remaining", r.remaining());
                return m;
            }
            case "release":
            case "confirm": {
                Settled s = Protocol.parseSettled(reply, parse.equals("release") ? SettleStatus.RELEASE
                        : SettleStatus.CONFIRM, "SECKILL." + parse.toUpperCase());
                return Map.of("status", s.status().name(), "remaining", s.remaining());
            }
            case "report": {
                Report r = json ? Protocol.parseReportJson((String) reply) : Protocol.parseReport(reply);
                return r == null ? null : reportFields(r);
            }
            case "get": {
                Reservation g = json ? Protocol.parseReservationJson((String) reply) : Protocol.parseReservation(reply);
                return g == null ? null : Map.of("user", g.user(), "qty", g.qty(), "state", g.state(),
                        "created_ms", g.createdMs(), "deadline_ms", g.deadlineMs());
            }
            case "status":
                return Map.of("status", Protocol.parseUnfence(reply).name());
            case "enter": {
                Entered e = Protocol.parseEntered(reply);
                return Map.of("status", e.status().name(), "entrants", e.entrants());
            }
            case "draw": {
                Drawn d = Protocol.parseDrawn(reply);
                return Map.of("drawn", d.drawn(), "remaining", d.remaining(), "left_to_draw", d.leftToDraw());
            }
            case "entrants": {
                EntrantsPage p = Protocol.parseEntrants(reply);
                List<Object> es = new ArrayList<>();
                for (Entrant e : p.entrants()) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("user", e.user());
                    m.put("qty", e.qty());
                    m.put("result", e.result());
                    es.add(m);
                }
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("cursor", p.cursor());
                m.put("entrants", es);
                return m;
            }
            default:
                throw new AssertionError("no parser " + parse);
        }
    }

    /** The report's fields, peers as [peer, sent, received], checked against the typed components. */
    private static Map<String, Object> reportFields(Report r) {
        assertEquals(r.fields().get("total"), r.total());
        assertEquals(r.fields().get("remaining"), r.remaining());
        assertEquals(r.fields().get("invariant"), r.invariant());
        assertEquals(r.fields().getOrDefault("shards", List.of()), r.shards());
        assertEquals(r.fields().get("fence"), r.fence());
        Map<String, Object> out = new LinkedHashMap<>();
        r.fields().forEach((k, v) -> {
            if (k.equals("peers")) {
                List<Object> peers = new ArrayList<>();
                for (Object p : (List<?>) v) {
                    Peer peer = (Peer) p;
                    peers.add(List.of(peer.peer(), peer.sentTotal(), peer.receivedTotal()));
                }
                out.put(k, peers);
            } else {
                out.put(k, v);
            }
        });
        return out;
    }

    /** {@code expect} as plain values; a report's field order is compared too (below). */
    private static Object expectedValue(String parse, JsonNode expect) {
        return json(expect);
    }

    /** A JSON value as plain Java: Long, String, Boolean, List, LinkedHashMap, null. */
    static Object json(JsonNode n) {
        if (n == null || n.isNull()) {
            return null;
        }
        if (n.isIntegralNumber()) {
            return n.longValue();
        }
        if (n.isBoolean()) {
            return n.booleanValue();
        }
        if (n.isTextual()) {
            return n.textValue();
        }
        if (n.isArray()) {
            List<Object> out = new ArrayList<>();
            n.forEach(e -> out.add(json(e)));
            return out;
        }
        Map<String, Object> out = new LinkedHashMap<>();
        n.properties().forEach(e -> out.put(e.getKey(), json(e.getValue())));
        return out;
    }

    /** The typed tree as a transport hands it over: maps as flat field/value lists. */
    static Object plain(JsonNode t) {
        JsonNode v = t.get("v");
        switch (t.get("t").asText()) {
            case "simple":
            case "bulk":
                return v.asText();
            case "int":
                return v.longValue();
            case "null":
                return null;
            case "array": {
                List<Object> out = new ArrayList<>();
                v.forEach(e -> out.add(plain(e)));
                return out;
            }
            case "map": {
                List<Object> out = new ArrayList<>();
                v.forEach(pair -> {
                    out.add(plain(pair.get(0)));
                    out.add(plain(pair.get(1)));
                });
                return out;
            }
            default:
                throw new AssertionError("unexpected tree " + t);
        }
    }

    private static Map<Object, Object> asMap(JsonNode t) {
        Map<Object, Object> out = new LinkedHashMap<>();
        t.get("v").forEach(pair -> out.put(plain(pair.get(0)), plain(pair.get(1))));
        return out;
    }

    private static Object jedisRead(byte[] raw) {
        return redis.clients.jedis.Protocol.read(new RedisInputStream(new ByteArrayInputStream(raw)));
    }

    private static CommandException fromJedis(byte[] raw) {
        JedisDataException e = assertThrows(JedisDataException.class, () -> jedisRead(raw));
        return new CommandException(e.getMessage(), e);
    }

    @org.junit.jupiter.api.Test
    void aMissingReportIsNull() {
        assertNull(Protocol.parseReport(null));
        assertNull(Protocol.parseReportJson(null));
    }
}
