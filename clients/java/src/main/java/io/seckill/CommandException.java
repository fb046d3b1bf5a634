package io.seckill;

/**
 * An error reply from the server, word for word ({@code ERR QTY must be from 1 to ...},
 * {@code WRONGTYPE ...}, {@code FENCED ...}, {@code TRYAGAIN ...}). Nothing changed.
 */
public class CommandException extends SeckillException {
    private static final long serialVersionUID = 1L;

    public CommandException(String message, Throwable cause) {
        super(message, cause);
    }

    /** The error's first word: ERR, WRONGTYPE, FENCED, TRYAGAIN, NOPERM, OOM, ... */
    public String code() {
        String m = getMessage() == null ? "" : getMessage();
        int sp = m.indexOf(' ');
        return sp < 0 ? m : m.substring(0, sp);
    }

    /** The slot is being migrated and the sale's stream is not on this node: retry. */
    public boolean tryAgain() {
        return "TRYAGAIN".equals(code());
    }

    /**
     * The Functions library's form of TRYAGAIN: during a slot migration that moved the
     * sale's stream first, the library's stream write fails with the cluster's own error
     * and the call changes nothing (docs/managed-redis.md). The library only touches keys of
     * the sale's slot, so outside a migration this error does not occur.
     */
    public boolean nonLocalKey() {
        String m = getMessage();
        return m != null && m.startsWith("ERR Script attempted to access a non local key in a cluster node");
    }

    /** Retried by the client: the slot is moving and nothing changed. */
    public boolean retryable() {
        return tryAgain() || nonLocalKey();
    }

    /** DRAW or SEND on a sale fenced since a failover or restart. */
    public boolean fenced() {
        return "FENCED".equals(code());
    }
}
