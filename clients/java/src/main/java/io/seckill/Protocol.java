package io.seckill;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;

/**
 * The SECKILL wire protocol as plain functions: argument lists and reply parsing, no I/O
 * (the same rules as clients/python/seckill/plain/protocol.py).
 *
 * <p>Replies come in as the transports hand them over: {@code String} (simple and bulk
 * strings, UTF-8), {@code Long}, {@code List<Object>}, {@code Map} (a RESP3 map), null.
 * {@code byte[]} is accepted too and read as UTF-8.
 */
public final class Protocol {
    /** The most rows one RECONCILE call carries (the module bounds a call). */
    public static final int MAX_CHUNK = 1000;
    /** User and reservation ids are 1 to 256 bytes. */
    public static final int MAX_ID_BYTES = 256;
    /** DRAW's and ENTRANTS' COUNT: 1 to 1000. */
    public static final int MAX_DRAW_COUNT = 1000;
    /** INIT's {@code DRAW BEACON name}: 1 to 256 bytes. */
    public static final int MAX_BEACON_NAME = 256;
    /** DRAW's {@code BEACON value}: 1 to 1024 bytes. */
    public static final int MAX_BEACON_VALUE = 1024;

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Set<String> INT_FIELDS = Set.of("total", "remaining", "pending", "confirmed",
            "released", "expired", "buyers", "reservations", "sent", "received", "orders_ok",
            "orders_pending", "orders_released", "orders_unknown", "orders_conflict");
    /** A draw sale's integers; nil allowed (draw_stock is nil before the first DRAW). */
    private static final Set<String> OPT_INT_FIELDS = Set.of("entrants", "drawn", "left_to_draw",
            "waitlist", "draw_stock");
    private static final List<String> REQUIRED = List.of("total", "remaining", "pending", "confirmed",
            "invariant");

    private Protocol() {}

    // ------------------------------------------------------------ arguments

    static String checkId(String value, String what) {
        if (value == null) {
            throw new IllegalArgumentException(what + " must be given");
        }
        int n = value.getBytes(StandardCharsets.UTF_8).length;
        if (n < 1 || n > MAX_ID_BYTES) {
            throw new IllegalArgumentException(what + " must be 1 to " + MAX_ID_BYTES + " bytes, got " + n);
        }
        return value;
    }

    /** A BEACON name or value: 1 to {@code max} bytes (UTF-8), as the server checks it. */
    static String checkBeacon(String value, int max, String what) {
        if (value == null) {
            throw new IllegalArgumentException(what + " must be given");
        }
        int n = value.getBytes(StandardCharsets.UTF_8).length;
        if (n < 1 || n > max) {
            throw new IllegalArgumentException(what + " must be 1 to " + max + " bytes, got " + n);
        }
        return value;
    }

    private static String count(int n, String what) {
        if (n < 1 || n > MAX_DRAW_COUNT) {
            throw new IllegalArgumentException(what + " must be 1 to " + MAX_DRAW_COUNT + ", got " + n);
        }
        return Integer.toString(n);
    }

    static String checkKey(String key) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("the sale key must be given");
        }
        return key;
    }

    /** RESERVE's arguments after the key. */
    public static List<String> reserveArgs(String user, long qty, String reqid) {
        List<String> a = new ArrayList<>(List.of(checkId(user, "user")));
        if (qty != 1) {
            a.add("QTY");
            a.add(Long.toString(qty));
        }
        if (reqid != null) {
            a.add("REQID");
            a.add(checkId(reqid, "reqid"));
        }
        return a;
    }

    /** ENTER's arguments after the key: the same as RESERVE's ({@code user [QTY n] [REQID id]}). */
    public static List<String> enterArgs(String user, long qty, String reqid) {
        return reserveArgs(user, qty, reqid);
    }

    /**
     * DRAW's arguments after the key: {@code COUNT n [BEACON value]}; {@code beaconValue} null
     * sends no BEACON (draw v2: the first DRAW of a sale that declared a beacon needs it).
     */
    public static List<String> drawArgs(int count, String beaconValue) {
        List<String> a = new ArrayList<>(List.of("COUNT", count(count, "DRAW COUNT")));
        if (beaconValue != null) {
            a.add("BEACON");
            a.add(checkBeacon(beaconValue, MAX_BEACON_VALUE, "BEACON value"));
        }
        return a;
    }

    /** ENTRANTS' arguments after the key: {@code cursor COUNT n}. */
    public static List<String> entrantsArgs(String cursor, int count) {
        if (cursor == null || cursor.isEmpty()) {
            throw new IllegalArgumentException("the ENTRANTS cursor must be given (\"0\" for the first page)");
        }
        return List.of(cursor, "COUNT", count(count, "ENTRANTS COUNT"));
    }

    /** RECONCILE's arguments after the key for one chunk (empty: the report alone). */
    public static List<String> reconcileArgs(List<Order> chunk, boolean expire, boolean apply) {
        if (chunk.size() > MAX_CHUNK) {
            throw new IllegalArgumentException("a RECONCILE chunk holds at most " + MAX_CHUNK + " rows");
        }
        List<String> a = new ArrayList<>();
        if (expire) {
            a.add("EXPIRE");
        }
        if (!chunk.isEmpty()) {
            a.add("ORDERS");
            a.add(Integer.toString(chunk.size()));
            for (Order o : chunk) {
                a.add(o.rid());
                a.add(o.user());
                a.add(Long.toString(o.qty()));
            }
        }
        if (apply) {
            a.add("APPLY");
        }
        a.add("FORMAT");
        a.add("JSON");
        return a;
    }

    /** The ledger in chunks of at most {@code size} rows, read lazily. */
    public static Iterable<List<Order>> chunks(Iterable<Order> orders, int size) {
        if (size < 1 || size > MAX_CHUNK) {
            throw new IllegalArgumentException("chunk size must be from 1 to " + MAX_CHUNK);
        }
        return () -> new Iterator<>() {
            private final Iterator<Order> it = orders.iterator();

            @Override
            public boolean hasNext() {
                return it.hasNext();
            }

            @Override
            public List<Order> next() {
                if (!it.hasNext()) {
                    throw new NoSuchElementException();
                }
                List<Order> chunk = new ArrayList<>(Math.min(size, 64));
                while (it.hasNext() && chunk.size() < size) {
                    chunk.add(it.next());
                }
                return chunk;
            }
        };
    }

    // ------------------------------------------------------------ replies

    /** bytes as UTF-8; a String unchanged; anything else is no text. */
    static String text(Object v, String what) {
        if (v instanceof String s) {
            return s;
        }
        if (v instanceof byte[] b) {
            return new String(b, StandardCharsets.UTF_8);
        }
        throw new ProtocolException(what + " is not a string: " + show(v));
    }

    static long integer(Object v, String what) {
        if (v instanceof Long n) {
            return n;
        }
        if (v instanceof Integer n) {
            return n;
        }
        if (v instanceof String || v instanceof byte[]) {
            try {
                return Long.parseLong(text(v, what));
            } catch (NumberFormatException e) {
                throw new ProtocolException(what + " is not an integer: " + show(v), e);
            }
        }
        throw new ProtocolException(what + " is not an integer: " + show(v));
    }

    static String show(Object v) {
        if (v instanceof byte[] b) {
            return "bytes \"" + new String(b, StandardCharsets.UTF_8) + "\"";
        }
        return v instanceof String s ? "\"" + s + "\"" : String.valueOf(v);
    }

    private static <E extends Enum<E>> E status(Object v, Class<E> type, String command) {
        String s = text(v, command + "'s status");
        try {
            return Enum.valueOf(type, s);
        } catch (IllegalArgumentException e) {
            throw new ProtocolException(command + " answered an unknown status " + show(s), e);
        }
    }

    private static List<?> array(Object reply, int n, String command) {
        if (!(reply instanceof List<?> l) || l.size() != n) {
            throw new ProtocolException(command + " answered " + show(reply) + ", not an array of " + n);
        }
        return l;
    }

    /** INIT: true when the sale was created (or replaced), false when it existed. */
    public static boolean parseInit(Object reply) {
        String s = text(reply, "SECKILL.INIT's reply");
        if (s.equals("OK")) {
            return true;
        }
        if (s.equals("EXISTS")) {
            return false;
        }
        throw new ProtocolException("SECKILL.INIT answered " + show(s));
    }

    public static Reserved parseReserved(Object reply) {
        List<?> r = array(reply, 3, "SECKILL.RESERVE");
        ReserveStatus st = status(r.get(0), ReserveStatus.class, "SECKILL.RESERVE");
        String id = r.get(1) == null ? null : text(r.get(1), "the reservation id");
        return new Reserved(st, id == null || id.isEmpty() ? null : id, integer(r.get(2), "remaining"));
    }

    /** RELEASE's or CONFIRM's reply; {@code allowed}: {@link SettleStatus#RELEASE} or CONFIRM. */
    public static Settled parseSettled(Object reply, Set<SettleStatus> allowed, String command) {
        List<?> r = array(reply, 2, command);
        SettleStatus st = status(r.get(0), SettleStatus.class, command);
        if (!allowed.contains(st)) {
            throw new ProtocolException(command + " answered an unknown status " + st);
        }
        return new Settled(st, integer(r.get(1), "remaining"));
    }

    public static Entered parseEntered(Object reply) {
        List<?> r = array(reply, 2, "SECKILL.ENTER");
        return new Entered(status(r.get(0), EnterStatus.class, "SECKILL.ENTER"), integer(r.get(1), "entrants"));
    }

    public static Drawn parseDrawn(Object reply) {
        List<?> r = array(reply, 3, "SECKILL.DRAW");
        return new Drawn(integer(r.get(0), "drawn"), integer(r.get(1), "remaining"),
                integer(r.get(2), "left_to_draw"));
    }

    /** ENTRANTS' {@code [next_cursor, [user, qty, result, ...]]}. */
    public static EntrantsPage parseEntrants(Object reply) {
        List<?> r = array(reply, 2, "SECKILL.ENTRANTS");
        String cursor = text(r.get(0), "the ENTRANTS cursor");
        if (!(r.get(1) instanceof List<?> flat) || flat.size() % 3 != 0) {
            throw new ProtocolException("SECKILL.ENTRANTS answered a page that is not (user, qty, result) triples: "
                    + show(r.get(1)));
        }
        List<Entrant> out = new ArrayList<>(flat.size() / 3);
        for (int i = 0; i < flat.size(); i += 3) {
            String result = text(flat.get(i + 2), "an entrant's result");
            if (!ENTRANT_RESULTS.contains(result)) {
                throw new ProtocolException("SECKILL.ENTRANTS answered an unknown result " + show(result));
            }
            out.add(new Entrant(text(flat.get(i), "an entrant's user"), integer(flat.get(i + 1), "an entrant's qty"),
                    result));
        }
        return new EntrantsPage(cursor, out);
    }

    private static final Set<String> ENTRANT_RESULTS = Set.of(Entrant.ENTERED, Entrant.DRAWN, Entrant.PROMOTED);

    public static UnfenceStatus parseUnfence(Object reply) {
        return status(reply, UnfenceStatus.class, "SECKILL.UNFENCE");
    }

    /** A RESP2 field/value array or a RESP3 map, as fields in order; null stays null. */
    public static Map<String, Object> pairs(Object reply) {
        if (reply == null) {
            return null;
        }
        Map<String, Object> out = new LinkedHashMap<>();
        if (reply instanceof Map<?, ?> m) {
            m.forEach((k, v) -> out.put(text(k, "a field name"), v));
            return out;
        }
        if (!(reply instanceof List<?> l) || l.size() % 2 != 0) {
            throw new ProtocolException("expected field/value pairs, got " + show(reply));
        }
        for (int i = 0; i < l.size(); i += 2) {
            out.put(text(l.get(i), "a field name"), l.get(i + 1));
        }
        return out;
    }

    /** INFO's or RECONCILE's RESP report; null for a missing key. */
    public static Report parseReport(Object reply) {
        Map<String, Object> p = pairs(reply);
        return p == null ? null : report(p, show(reply));
    }

    /** INFO's or RECONCILE's report in its FORMAT JSON form; null for a missing key. */
    public static Report parseReportJson(String json) {
        if (json == null) {
            return null;
        }
        return report(jsonObject(json), json);
    }

    /** GET's RESP reply; null for an unknown reservation or sale. */
    public static Reservation parseReservation(Object reply) {
        Map<String, Object> p = pairs(reply);
        return p == null ? null : reservation(p);
    }

    /** GET's FORMAT JSON reply; null for an unknown reservation or sale. */
    public static Reservation parseReservationJson(String json) {
        return json == null ? null : reservation(jsonObject(json));
    }

    private static Reservation reservation(Map<String, Object> p) {
        for (String f : List.of("user", "qty", "state", "created_ms", "deadline_ms")) {
            if (!p.containsKey(f)) {
                throw new ProtocolException("SECKILL.GET's reply has no " + f + ": " + p);
            }
        }
        return new Reservation(text(p.get("user"), "user"), integer(p.get("qty"), "qty"),
                text(p.get("state"), "state"), integer(p.get("created_ms"), "created_ms"),
                integer(p.get("deadline_ms"), "deadline_ms"));
    }

    private static Report report(Map<String, Object> p, String raw) {
        Map<String, Object> out = new LinkedHashMap<>();
        p.forEach((name, value) -> out.put(name, field(name, value)));
        for (String f : REQUIRED) {
            if (!out.containsKey(f)) {
                throw new ProtocolException("a report without " + f + ": " + raw);
            }
        }
        @SuppressWarnings("unchecked")
        List<Long> shards = (List<Long>) out.getOrDefault("shards", List.of());
        return new Report(num(out, "total"), num(out, "remaining"), num(out, "pending"),
                num(out, "confirmed"), num(out, "released"), num(out, "expired"), num(out, "buyers"),
                num(out, "reservations"), shards, (String) out.get("invariant"),
                (String) out.get("fence"), out);
    }

    private static long num(Map<String, Object> m, String f) {
        Object v = m.get(f);
        return v == null ? 0 : (Long) v;
    }

    private static Object field(String name, Object value) {
        if (INT_FIELDS.contains(name)) {
            return integer(value, name);
        }
        if (OPT_INT_FIELDS.contains(name)) {
            return value == null ? null : integer(value, name);
        }
        if (name.equals("shards")) {
            List<Long> out = new ArrayList<>();
            for (Object v : list(value, name)) {
                out.add(integer(v, name));
            }
            return List.copyOf(out);
        }
        if (name.endsWith("_ids")) {
            List<String> out = new ArrayList<>();
            for (Object v : list(value, name)) {
                out.add(text(v, name));
            }
            return List.copyOf(out);
        }
        if (name.equals("peers")) {
            List<Peer> out = new ArrayList<>();
            for (Object v : list(value, name)) {
                List<?> t = array(v, 3, "a peer of the report");
                out.add(new Peer(text(t.get(0), "peer"), integer(t.get(1), "sent_total"),
                        integer(t.get(2), "received_total")));
            }
            return List.copyOf(out);
        }
        if (value instanceof List<?> l) {
            // A field this client does not know yet (a split sale's
            // `sent_to` pairs, say): kept as the array it is, so a newer
            // server's report still parses.
            return java.util.Collections.unmodifiableList(new ArrayList<>(l));
        }
        return value == null ? null : value instanceof Long ? value : text(value, name);
    }

    private static List<?> list(Object v, String what) {
        if (v == null) {
            return List.of();
        }
        if (!(v instanceof List<?> l)) {
            throw new ProtocolException(what + " is not an array: " + show(v));
        }
        return l;
    }

    // ------------------------------------------------------------ JSON

    private static Map<String, Object> jsonObject(String json) {
        JsonNode node;
        try {
            node = JSON.readTree(json);
        } catch (JsonProcessingException e) {
            throw new ProtocolException("not JSON: " + json, e);
        }
        if (node == null || !node.isObject()) {
            throw new ProtocolException("not a JSON object: " + json);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        node.properties().forEach(e -> out.put(e.getKey(), plain(e.getValue())));
        return out;
    }

    /** A JSON value as the RESP values the parsers take: Long, String, List, null. */
    private static Object plain(JsonNode n) {
        if (n.isNull()) {
            return null;
        }
        if (n.isIntegralNumber()) {
            if (!n.canConvertToLong()) {
                throw new ProtocolException("a number past 64 bits: " + n);
            }
            return n.longValue();
        }
        if (n.isTextual()) {
            return n.textValue();
        }
        if (n.isArray()) {
            List<Object> out = new ArrayList<>(n.size());
            n.forEach(e -> out.add(plain(e)));
            return out;
        }
        throw new ProtocolException("an unexpected JSON value: " + n);
    }
}
