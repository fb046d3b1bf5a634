//! Latency under load for `make bench`: a fixed offered rate, unpipelined.
//!
//!   loadgen PORT RATE CLIENTS SECONDS WARMUP_SECONDS ARG...
//!
//! CLIENTS connections driven by one thread (ppoll), each sending at its own
//! fixed schedule (RATE / CLIENTS per second, staggered), one command at a
//! time.
//! `__rand_int__` in an argument becomes a random 12-digit number. Latency
//! is measured from the time a command was *due* to its reply, so a slow
//! reply that delays the next send is counted against the server too (no
//! coordinated omission). Samples of the first WARMUP_SECONDS are dropped.
//! Prints one line: `sent errors achieved_rate p50_us p99_us p999_us max_us`.
//! A member of the workspace (std only): `cargo build --release -p loadgen`,
//! which bench.py runs.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// End of the RESP2 reply starting at `pos`, if `buf` holds all of it.
fn reply_end(buf: &[u8], pos: usize) -> Option<usize> {
    let line_end = pos + buf.get(pos..)?.windows(2).position(|w| w == b"\r\n")?;
    let head = *buf.get(pos)?;
    let num = || -> i64 { std::str::from_utf8(&buf[pos + 1..line_end]).ok().and_then(|s| s.parse().ok()).unwrap_or(-1) };
    match head {
        b'+' | b'-' | b':' => Some(line_end + 2),
        b'$' => {
            let n = num();
            if n < 0 {
                return Some(line_end + 2);
            }
            let end = line_end + 2 + n as usize + 2;
            (buf.len() >= end).then_some(end)
        }
        b'*' => {
            let n = num();
            let mut at = line_end + 2;
            for _ in 0..n.max(0) {
                at = reply_end(buf, at)?;
            }
            Some(at)
        }
        _ => Some(buf.len()),
    }
}

fn encode(args: &[String], rng: &mut u64) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = if a.contains("__rand_int__") {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            a.replace("__rand_int__", &format!("{:012}", *rng % 1_000_000_000_000))
        } else {
            a.clone()
        };
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[repr(C)]
struct PollFd {
    fd: i32,
    events: i16,
    revents: i16,
}

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn ppoll(fds: *mut PollFd, nfds: u64, timeout: *const Timespec, sigmask: *const u8) -> i32;
}

const POLLIN: i16 = 1;

struct Client {
    conn: TcpStream,
    due: Instant,
    waiting: bool,
    buf: Vec<u8>,
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.len() < 7 {
        eprintln!("usage: loadgen PORT RATE CLIENTS SECONDS WARMUP_SECONDS ARG...");
        std::process::exit(2);
    }
    let port: u16 = argv[1].parse().expect("port");
    let rate: f64 = argv[2].parse().expect("rate");
    let clients: usize = argv[3].parse().expect("clients");
    let seconds: f64 = argv[4].parse().expect("seconds");
    let warmup: f64 = argv[5].parse().expect("warmup");
    let command: Vec<String> = argv[6..].to_vec();
    let interval = Duration::from_secs_f64(clients as f64 / rate);
    let mut all: Vec<Client> = (0..clients)
        .map(|_| {
            let conn = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            conn.set_nodelay(true).ok();
            conn.set_nonblocking(true).expect("nonblocking");
            Client { conn, due: Instant::now(), waiting: false, buf: Vec::with_capacity(256) }
        })
        .collect();
    // One thread, one event loop: every client on its own staggered schedule.
    let start = Instant::now() + Duration::from_millis(100);
    for (t, c) in all.iter_mut().enumerate() {
        c.due = start + interval.mul_f64(t as f64 / clients as f64);
    }
    let stop = start + Duration::from_secs_f64(seconds);
    let keep_from = start + Duration::from_secs_f64(warmup);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut lat: Vec<u32> = Vec::new();
    let (mut sent, mut errors) = (0u64, 0u64);
    let mut chunk = [0u8; 4096];
    let mut fds: Vec<PollFd> = Vec::with_capacity(clients);
    let mut idx: Vec<usize> = Vec::with_capacity(clients);
    loop {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        let mut busy = false;
        for c in all.iter_mut() {
            if c.waiting {
                busy = true;
                continue;
            }
            if c.due >= stop {
                continue;
            }
            if c.due <= now {
                c.conn.write_all(&encode(&command, &mut rng)).expect("write");
                c.waiting = true;
                busy = true;
            } else {
                next = Some(next.map_or(c.due, |n: Instant| n.min(c.due)));
            }
        }
        if !busy && next.is_none() {
            break;
        }
        fds.clear();
        idx.clear();
        for (i, c) in all.iter().enumerate() {
            if c.waiting {
                fds.push(PollFd { fd: c.conn.as_raw_fd(), events: POLLIN, revents: 0 });
                idx.push(i);
            }
        }
        let wait = next.map(|n| n.saturating_duration_since(Instant::now())).unwrap_or(Duration::from_millis(100));
        let ts = Timespec { sec: wait.as_secs() as i64, nsec: wait.subsec_nanos() as i64 };
        let ready = unsafe { ppoll(fds.as_mut_ptr(), fds.len() as u64, &ts, std::ptr::null()) };
        if ready <= 0 {
            continue;
        }
        for (f, &i) in fds.iter().zip(idx.iter()) {
            if f.revents == 0 {
                continue;
            }
            let c = &mut all[i];
            loop {
                match c.conn.read(&mut chunk) {
                    Ok(0) => panic!("connection closed"),
                    Ok(n) => c.buf.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("read: {e}"),
                }
            }
            if let Some(end) = reply_end(&c.buf, 0) {
                let done = Instant::now();
                sent += 1;
                if c.buf[0] == b'-' {
                    errors += 1;
                }
                c.buf.drain(..end);
                if c.due >= keep_from {
                    lat.push((done - c.due).as_micros().min(u32::MAX as u128) as u32);
                }
                c.waiting = false;
                c.due += interval;
            }
        }
    }
    lat.sort_unstable();
    let pct = |p: f64| -> u32 {
        if lat.is_empty() {
            0
        } else {
            lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1]
        }
    };
    println!(
        "{} {} {:.0} {} {} {} {}",
        sent,
        errors,
        lat.len() as f64 / (seconds - warmup),
        pct(0.50),
        pct(0.99),
        pct(0.999),
        lat.last().copied().unwrap_or(0)
    );
}
