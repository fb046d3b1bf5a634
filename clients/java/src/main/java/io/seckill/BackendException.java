package io.seckill;

/** Neither the seckill module nor the seckill Functions library is on the server. */
public class BackendException extends SeckillException {
    private static final long serialVersionUID = 1L;

    public BackendException(String message) {
        super(message);
    }
}
