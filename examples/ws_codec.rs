//! How fast `wire::websocket::Decoder` decodes client frames, for `scripts/bench ws`: 64 MiB
//! of masked text frames, once as 64 KiB messages and once as 300-byte ones (a
//! `session/update`-sized message), fed in 64 KiB reads as the driver does; UTF-8 validation
//! and unmasking included. Prints one JSON object.

use gosling::wire::websocket::{client_frame, Decoder, Event, Opcode};
use std::time::Instant;

fn run(msg_len: usize, total: usize) -> (f64, usize) {
    let text: String = "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"text\":\"héllo wörld \"}}"
        .chars()
        .cycle()
        .take(msg_len)
        .collect();
    let frame = client_frame(true, Opcode::Text, text.as_bytes(), [0x12, 0x34, 0x56, 0x78]);
    let count = total / frame.len();
    let mut wire = Vec::with_capacity(count * frame.len());
    for _ in 0..count {
        wire.extend_from_slice(&frame);
    }
    let mut best = f64::MAX;
    let mut got = 0;
    for _ in 0..5 {
        let mut d = Decoder::new(64 << 20);
        let mut events = Vec::new();
        got = 0;
        let t = Instant::now();
        for chunk in wire.chunks(64 << 10) {
            d.feed(chunk, &mut events).unwrap();
            got += events.iter().filter(|e| matches!(e, Event::Text(_))).count();
            events.clear();
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    assert_eq!(got, count);
    (wire.len() as f64 / best / 1e6, count)
}

fn main() {
    let (big, _) = run(64 << 10, 64 << 20);
    let (small, n) = run(300, 64 << 20);
    println!(
        "{{\"big_mb_s\": {big:.0}, \"small_mb_s\": {small:.0}, \"small_msgs_per_s\": {:.0}}}",
        small * 1e6 / (64 << 20) as f64 * n as f64
    );
}
