package seckill

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// replyError stands for go-redis's error replies (proto.RedisError, which
// lives in an internal package): an error with the RedisError marker.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// decodeRESP reads one RESP2/RESP3 reply into the values go-redis's Do
// gives: string, int64, nil, []interface{}, map[interface{}]interface{},
// float64, bool, and an error reply as replyError. Test-only: the vectors'
// raw bytes and the fuzz tests go through it.
func decodeRESP(raw []byte) (interface{}, error) {
	rd := bufio.NewReader(bytes.NewReader(raw))
	v, err := readRESP(rd, 0)
	if err != nil {
		return nil, err
	}
	if rd.Buffered() > 0 {
		return nil, fmt.Errorf("%d bytes after the reply", rd.Buffered())
	}
	return v, nil
}

func readRESP(rd *bufio.Reader, depth int) (interface{}, error) {
	if depth > 64 {
		return nil, fmt.Errorf("nested too deep")
	}
	line, err := rd.ReadString('\n')
	if err != nil || len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("a bad line %q", line)
	}
	kind, rest := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return rest, nil
	case '-':
		return replyError(rest), nil
	case ':':
		return strconv.ParseInt(rest, 10, 64)
	case '_':
		return nil, nil
	case ',':
		return strconv.ParseFloat(rest, 64)
	case '#':
		return rest == "t", nil
	case '$', '=':
		return readBulk(rd, rest)
	case '*', '~', '%':
		return readAggregate(rd, kind, rest, depth)
	}
	return nil, fmt.Errorf("an unknown type %q", kind)
}

func readBulk(rd *bufio.Reader, rest string) (interface{}, error) {
	n, err := strconv.Atoi(rest)
	if err != nil || n < -1 || n > 1<<20 {
		return nil, fmt.Errorf("a bad length %q", rest)
	}
	if n == -1 {
		return nil, nil
	}
	buf := make([]byte, n+2)
	if _, err := readFull(rd, buf); err != nil || string(buf[n:]) != "\r\n" {
		return nil, fmt.Errorf("a short bulk string")
	}
	return string(buf[:n]), nil
}

func readFull(rd *bufio.Reader, buf []byte) (int, error) {
	got := 0
	for got < len(buf) {
		n, err := rd.Read(buf[got:])
		got += n
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

func readAggregate(rd *bufio.Reader, kind byte, rest string, depth int) (interface{}, error) {
	n, err := strconv.Atoi(rest)
	if err != nil || n < -1 || n > 1<<16 {
		return nil, fmt.Errorf("a bad count %q", rest)
	}
	if n == -1 {
		return nil, nil
	}
	if kind == '%' {
		m := make(map[interface{}]interface{}, n)
		for i := 0; i < n; i++ {
			k, err := readRESP(rd, depth+1)
			if err != nil {
				return nil, err
			}
			v, err := readRESP(rd, depth+1)
			if err != nil {
				return nil, err
			}
			if !hashable(k) {
				return nil, fmt.Errorf("a map key of type %T", k)
			}
			m[k] = v
		}
		return m, nil
	}
	a := make([]interface{}, n)
	for i := range a {
		if a[i], err = readRESP(rd, depth+1); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func hashable(k interface{}) bool {
	switch k.(type) {
	case string, int64, float64, bool, nil, replyError:
		return true
	}
	return false
}
