package io.seckill;

/** A reply that does not have the shape docs/commands.md gives it. */
public class ProtocolException extends SeckillException {
    private static final long serialVersionUID = 1L;

    public ProtocolException(String message) {
        super(message);
    }

    public ProtocolException(String message, Throwable cause) {
        super(message, cause);
    }
}
