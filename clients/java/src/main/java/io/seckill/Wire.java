package io.seckill;

import java.util.List;

/**
 * One command as sent: every word, the command's name first.
 *
 * @param keyIndex which word is the key (-1: none); a cluster transport routes by it
 * @param route    the key whose node should answer a command without a key of its own
 *                 (SECKILL.INFO without a key for the backend check), or null for any node
 * @param reply    the reply's shape, for drivers (Lettuce) that decode by a declared output
 */
public record Wire(List<String> words, int keyIndex, String route, Reply reply) {
    /** A simple string, an array (nested arrays allowed), or one bulk string or nil. */
    public enum Reply { STATUS, ARRAY, BULK }

    /** The key the call routes by (the declared key, else {@link #route()}); null for any node. */
    public String routingKey() {
        return keyIndex < 0 ? route : words.get(keyIndex);
    }

    /** The command's name. */
    public String name() {
        return words.get(0);
    }

    /** The words after the command's name. */
    public List<String> args() {
        return words.subList(1, words.size());
    }

    /** A command with no key, sent to the node of {@code route} (any node when null). */
    static Wire keyless(String route, Reply reply, String... words) {
        return new Wire(List.of(words), -1, route, reply);
    }
}
