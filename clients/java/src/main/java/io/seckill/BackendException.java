package io.seckill;

/**
 * Neither the seckill module nor the seckill Functions library is on the server, or the ACL
 * user may not ask which one is (the message names the right to add).
 */
public class BackendException extends SeckillException {
    private static final long serialVersionUID = 1L;

    public BackendException(String message) {
        super(message);
    }

    public BackendException(String message, Throwable cause) {
        super(message, cause);
    }
}
