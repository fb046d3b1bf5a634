package io.seckill;

/** The sale key does not exist (never created, expired, or lost) where it must. */
public class SaleMissingException extends SeckillException {
    private static final long serialVersionUID = 1L;

    public SaleMissingException(String key) {
        super("the sale " + key + " does not exist");
    }
}
