#!/usr/bin/env python3
"""A hostile MCP server on stdio for the sandbox tests (tests/it/sandbox.rs): each tool tries
one thing a confined extension must not do, and answers with what happened, so the test can
see the refusal and that the server still answers afterwards. Python stdlib only.

Tools (each answers one text line; "DONE ..." when the attempt succeeded, "REFUSED ..." with
the error when the kernel refused it):
  read    {path}           read a file
  write   {path}           create a file
  list    {path}           list a directory
  connect {host, port}     open a TCP connection (2 s)
  fetch   {url}            GET a URL through the proxy the environment names (urllib)
  signal  {pid}            kill(pid, 0): may this process signal that one?
  environ {pid}            read /proc/<pid>/environ
  memory  {mib}            allocate up to `mib` MiB, 16 MiB at a time, then free it
  fork    {count}          fork up to `count` sleeping children, then end them
  ping                     "pong"
"""
import json
import os
import signal
import socket
import sys
import time


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def refused(e):
    return f"REFUSED {type(e).__name__}: {e}"


def t_read(a):
    try:
        with open(a["path"], "rb") as f:
            return f"DONE read {len(f.read())} bytes"
    except OSError as e:
        return refused(e)


def t_write(a):
    try:
        with open(a["path"], "w") as f:
            f.write("written by a confined extension\n")
        return "DONE wrote"
    except OSError as e:
        return refused(e)


def t_list(a):
    try:
        return "DONE listed " + ",".join(sorted(os.listdir(a["path"])))
    except OSError as e:
        return refused(e)


def t_connect(a):
    try:
        s = socket.create_connection((a["host"], int(a["port"])), timeout=2)
        s.close()
        return "DONE connected"
    except OSError as e:
        return refused(e)


def t_fetch(a):
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(a["url"], timeout=10) as r:
            return f"DONE {r.status} " + r.read(200).decode(errors="replace")
    except urllib.error.HTTPError as e:
        return f"REFUSED HTTP {e.code}: " + e.read(300).decode(errors="replace")
    except OSError as e:
        return refused(e)


def t_signal(a):
    try:
        os.kill(int(a["pid"]), 0)
        return "DONE may signal"
    except OSError as e:
        return refused(e)


def t_environ(a):
    try:
        with open(f"/proc/{int(a['pid'])}/environ", "rb") as f:
            return f"DONE environ {len(f.read())} bytes"
    except OSError as e:
        return refused(e)


def t_memory(a):
    chunks = []
    try:
        for _ in range(int(a["mib"]) // 16):
            chunks.append(bytearray(16 << 20))
        return f"DONE allocated {16 * len(chunks)} MiB"
    except MemoryError:
        return f"REFUSED MemoryError after {16 * len(chunks)} MiB"
    finally:
        del chunks


def t_fork(a):
    kids = []
    try:
        for _ in range(int(a["count"])):
            pid = os.fork()
            if pid == 0:
                try:
                    time.sleep(30)
                finally:
                    os._exit(0)
            kids.append(pid)
        return f"DONE forked {len(kids)}"
    except OSError as e:
        return f"REFUSED {type(e).__name__} after {len(kids)} processes: {e}"
    finally:
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass


TOOLS = {
    "read": t_read,
    "write": t_write,
    "list": t_list,
    "connect": t_connect,
    "fetch": t_fetch,
    "signal": t_signal,
    "environ": t_environ,
    "memory": t_memory,
    "fork": t_fork,
    "ping": lambda a: "pong",
}


def main():
    for line in sys.stdin:
        msg = json.loads(line)
        mid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
        if mid is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}}, "serverInfo": {"name": "hostile", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
                {"name": n, "description": n, "inputSchema": {"type": "object"}} for n in TOOLS]}})
        elif method == "tools/call":
            out = TOOLS[params["name"]](params.get("arguments") or {})
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": out}], "isError": False}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": method}})


if __name__ == "__main__":
    main()
