//! The live throughput sampler on a real loopback connection: the per-interval
//! byte counts of the sender (bytes acked) and of the receiver (bytes received) add
//! up to exactly what was transferred, each rate is bytes · 8 / interval, and
//! non-TCP sockets and bad intervals are clear errors.
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use opsel::sys::linux::tput::{Side, ThroughputSampler};
use opsel::ErrorKind;

const TOTAL: u64 = 48 << 20;

#[test]
fn sender_and_receiver_samples_add_up_to_the_transfer() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // The receiver's first snapshot must come before any byte arrives, or the
    // bytes received before it are not in any interval: the sender waits for it.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let recv = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        let mut rs = ThroughputSampler::new(&s, Side::Receiver, Duration::from_millis(5)).unwrap();
        ready_tx.send(()).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let (mut got, mut sampled) = (0u64, 0u64);
        loop {
            let n = (&s).read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got += n as u64;
            if let Some(x) = rs.sample_now().unwrap() {
                sampled += x.bytes;
            }
        }
        if let Some(x) = rs.sample_now().unwrap() {
            sampled += x.bytes;
        }
        (got, sampled)
    });
    let tx = TcpStream::connect(addr).unwrap();
    ready_rx.recv().unwrap();
    // Slow the sender so the transfer spans several intervals.
    tx.set_nodelay(true).unwrap();
    let mut sampler = ThroughputSampler::new(&tx, Side::Sender, Duration::from_millis(10)).unwrap();
    assert_eq!(sampler.interval_ns(), 10_000_000);
    let chunk = vec![7u8; 1 << 20];
    let mut samples = Vec::new();
    for _ in 0..(TOTAL >> 20) {
        (&tx).write_all(&chunk).unwrap();
        samples.push(sampler.wait_next().unwrap());
    }
    tx.shutdown(std::net::Shutdown::Write).unwrap();
    let (got, rsampled) = recv.join().unwrap();
    assert_eq!(got, TOTAL);
    // The receiver's counter moved by the bytes it read, plus one for the FIN's
    // sequence number when the FIN arrived before the last sample.
    assert!(
        rsampled == TOTAL || rsampled == TOTAL + 1,
        "received {rsampled} of {TOTAL}"
    );
    // The last ACKs may still be in flight: sample until the peer has acked all
    // data (bytes_acked counts the FIN's sequence number too: TOTAL + 1), bounded.
    let mut acked: u64 = samples.iter().map(|s| s.bytes).sum();
    for _ in 0..500 {
        if acked >= TOTAL {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        if let Some(s) = sampler.sample_now().unwrap() {
            acked += s.bytes;
            samples.push(s);
        }
    }
    assert!(
        acked == TOTAL || acked == TOTAL + 1,
        "acked {acked} of {TOTAL}"
    );
    for s in &samples {
        assert!(s.interval_ns > 0);
        let want = s.bytes as f64 * 8.0 * 1e9 / s.interval_ns as f64;
        assert_eq!(s.rate_bps, want);
        if let Some(d) = s.delivery_rate_bps {
            assert!(d > 0.0 && d.is_finite());
        }
    }
    // Timestamps are increasing: one sample per interval, no reordering.
    assert!(samples.windows(2).all(|w| w[1].at_ns > w[0].at_ns));
    assert!(samples.iter().filter(|s| s.bytes > 0).count() >= 2);
}

#[test]
fn bad_sockets_and_intervals() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let e = ThroughputSampler::new(&udp, Side::Sender, Duration::from_secs(1))
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("not TCP"), "{e}");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    for bad in [Duration::ZERO, Duration::from_secs(7200)] {
        let e = ThroughputSampler::new(&s, Side::Sender, bad).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{bad:?}");
    }
}
