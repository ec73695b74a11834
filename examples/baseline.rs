//! The benchmarks' baseline: a do-nothing tiny_http server (200 "ok" to everything), started
//! and measured the same way as `gosling agent`, so ratios survive a noisy machine.

fn main() {
    let server = tiny_http::Server::http("127.0.0.1:0").expect("bind 127.0.0.1:0");
    println!("baseline listening on http://{}", server.server_addr());
    for rq in server.incoming_requests() {
        let _ = rq.respond(tiny_http::Response::from_string("ok"));
    }
}
