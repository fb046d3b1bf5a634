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

    /** DRAW or SEND on a sale fenced since a failover or restart. */
    public boolean fenced() {
        return "FENCED".equals(code());
    }
}
