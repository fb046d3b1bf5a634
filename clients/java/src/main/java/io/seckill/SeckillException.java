package io.seckill;

/** Every error this client raises is one of these. */
public class SeckillException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public SeckillException(String message) {
        super(message);
    }

    public SeckillException(String message, Throwable cause) {
        super(message, cause);
    }
}
