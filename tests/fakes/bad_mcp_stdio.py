#!/usr/bin/env python3
"""A deliberately misbehaving MCP server on stdio, one misbehaviour per mode.

    bad_mcp_stdio.py MODE [RECORD_FILE]

Every message received is appended to RECORD_FILE (one JSON line each) when given, so a test
can check what the client sent (e.g. notifications/cancelled). Modes:

  ok               a plain server: tools `echo` and `slow` (sleeps `seconds`)
  crash_mid_call   tools/call: write to stderr, then exit 3
  hang             tools/call is never answered
  exit_at_start    complain on stderr and exit 1 before reading anything
  garbage          non-JSON and non-JSON-RPC lines around every answer
  flood            50,000 junk lines before answering tools/call
  huge_line        a 20 MiB line before answering tools/call
  wrong_ids        tools/call: an answer with a wrong id, then the right one twice
  no_init          never answers initialize
  ignore_term      ignores SIGTERM and stdin EOF (only SIGKILL ends it)
  server_requests  tools/call: ask the client `ping` and `sampling/createMessage` first,
                   answer with what came back
  sampling_flood   tool `flood` {count, maxTokens, sequential, padding}: sends `count` sampling/createMessage
                   requests (all at once, or each after the previous answer), answers with a
                   JSON summary: {"ok": [answer texts], "errors": {message: n}, "meta": [_meta]};
                   after the first tools/list answer, one unprompted sampling request (id "s-unprompted")
  bad_version      answers initialize with protocolVersion 1999-01-01
  old_version      answers initialize with protocolVersion 2025-06-18, whatever was asked
  deaf             after answering its first tools/call, never reads stdin again and writes
                   log notifications without end
  trickle          each tools/call answer comes in pieces, 20 ms apart; 300 ms after the first
                   call, unasked, a new tool `late`, `notifications/tools/list_changed` and a
                   `ping` request of ours (id "s-late"), while no call is in flight
"""
import json
import signal
import sys
import threading
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
RECORD = sys.argv[2] if len(sys.argv) > 2 else None


OUT = threading.Lock()


def send(obj):
    with OUT:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def send_in_pieces(obj):
    line = json.dumps(obj) + "\n"
    with OUT:
        for i in range(0, len(line), 16):
            sys.stdout.write(line[i:i + 16])
            sys.stdout.flush()
            time.sleep(0.02)


def late_news():
    TOOLS.append({"name": "late", "description": "Added later", "inputSchema": {"type": "object"}})
    send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    send({"jsonrpc": "2.0", "id": "s-late", "method": "ping"})


def record(msg):
    if RECORD:
        with open(RECORD, "a") as f:
            f.write(json.dumps(msg) + "\n")


TOOLS = [
    {"name": "echo", "description": "Echo", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},
    {"name": "slow", "description": "Sleep", "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
]


if MODE == "sampling_flood":
    TOOLS.append({"name": "flood", "description": "Ask the client for sampling many times",
                  "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}, "maxTokens": {"type": "integer"}, "sequential": {"type": "boolean"}, "padding": {"type": "integer"}}}})


def sampling_flood(args, answers):
    count = int(args.get("count", 1))
    max_tokens = int(args.get("maxTokens", 100))
    pad = int(args.get("padding", 0))
    ids = ["f%d" % i for i in range(count)]

    def ask(i, sid):
        send({"jsonrpc": "2.0", "id": sid, "method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "flood question %d" % i + "x" * pad}}],
            "maxTokens": max_tokens}})

    def wait_for(wanted):
        while not all(w in answers for w in wanted):
            line = sys.stdin.readline()
            if not line:
                sys.exit(0)
            answer = json.loads(line)
            record(answer)
            answers[answer.get("id")] = answer

    if args.get("sequential"):
        for i, sid in enumerate(ids):
            ask(i, sid)
            wait_for([sid])
    else:
        for i, sid in enumerate(ids):
            ask(i, sid)
        wait_for(ids)
    summary = {"ok": [], "errors": {}, "meta": []}
    for sid in ids:
        a = answers.pop(sid)
        if "result" in a:
            summary["ok"].append(a["result"]["content"]["text"])
            summary["meta"].append(a["result"].get("_meta"))
        else:
            m = a["error"]["message"]
            summary["errors"][m] = summary["errors"].get(m, 0) + 1
    return summary


def result(text):
    return {"content": [{"type": "text", "text": text}], "isError": False}


def main():
    if MODE == "exit_at_start":
        sys.stderr.write("fatal: FAKE_TOKEN is not set, cannot start\n")
        sys.stderr.flush()
        sys.exit(1)
    if MODE == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pending_client_answers = {}
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        record(msg)
        method = msg.get("method")
        mid = msg.get("id")
        if method is None:
            # An answer to one of our own requests.
            pending_client_answers[mid] = msg
            continue
        if method == "initialize":
            if MODE == "no_init":
                continue
            version = {"bad_version": "1999-01-01", "old_version": "2025-06-18"}.get(MODE, msg["params"]["protocolVersion"])
            if MODE == "garbage":
                sys.stdout.write("this is not json\n{\"jsonrpc\": \"1.0\"}\n[1, 2]\n")
            send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "bad-" + MODE, "version": "0"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
            if MODE == "sampling_flood" and not pending_client_answers.get("unprompted-sent"):
                pending_client_answers["unprompted-sent"] = True
                # Unprompted, outside any tool call: the answer is recorded.
                send({"jsonrpc": "2.0", "id": "s-unprompted", "method": "sampling/createMessage", "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "unprompted"}}], "maxTokens": 10}})
        elif method == "tools/call":
            args = msg["params"].get("arguments") or {}
            name = msg["params"]["name"]
            if MODE == "crash_mid_call":
                sys.stderr.write("boom: crashing on purpose in the middle of a call\n")
                sys.stderr.flush()
                time.sleep(0.2)
                sys.exit(3)
            if MODE == "hang":
                continue
            if MODE == "garbage":
                sys.stdout.write("garbage before the answer\n")
            if MODE == "flood":
                for i in range(50000):
                    sys.stdout.write("junk line %d\n" % i)
            if MODE == "huge_line":
                sys.stdout.write("x" * (20 << 20) + "\n")
            if MODE == "wrong_ids":
                send({"jsonrpc": "2.0", "id": mid + 1000 if isinstance(mid, int) else "nope", "result": result("wrong id")})
            if name == "flood":
                send({"jsonrpc": "2.0", "id": mid, "result": result(json.dumps(sampling_flood(args, pending_client_answers)))})
                continue
            if MODE == "server_requests":
                send({"jsonrpc": "2.0", "id": "s1", "method": "ping"})
                send({"jsonrpc": "2.0", "id": "s2", "method": "sampling/createMessage", "params": {"messages": []}})
                while "s1" not in pending_client_answers or "s2" not in pending_client_answers:
                    answer = json.loads(sys.stdin.readline())
                    record(answer)
                    pending_client_answers[answer.get("id")] = answer
                send({"jsonrpc": "2.0", "id": mid, "result": result(json.dumps(pending_client_answers))})
                continue
            if name == "slow":
                time.sleep(float(args.get("seconds", 1)))
            text = "echo: " + str(args.get("message", "")) if name == "echo" else "slept"
            if MODE == "deaf":
                send({"jsonrpc": "2.0", "id": mid, "result": result(text)})
                while True:
                    send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "debug", "data": "chatter " * 10}})
            if MODE == "trickle":
                send_in_pieces({"jsonrpc": "2.0", "id": mid, "result": result(text)})
                if not any(t["name"] == "late" for t in TOOLS) and not getattr(main, "timer", None):
                    main.timer = threading.Timer(0.3, late_news)
                    main.timer.start()
                continue
            send({"jsonrpc": "2.0", "id": mid, "result": result(text)})
            if MODE == "wrong_ids":
                send({"jsonrpc": "2.0", "id": mid, "result": result("duplicate")})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        elif mid is not None:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})
    if MODE == "ignore_term":
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main()
