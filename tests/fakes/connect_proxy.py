"""A minimal HTTP CONNECT proxy that writes each tunnel's target to a log file.

    python3 connect_proxy.py LOGFILE     # listens on 127.0.0.1:0, prints "PORT <n>"
"""
import socket
import sys
import threading

LOG = sys.argv[1]


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def handle(client):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = client.recv(4096)
        if not chunk:
            client.close()
            return
        head += chunk
    line = head.split(b"\r\n", 1)[0].decode()
    method, target, _ = line.split(" ", 2)
    if method != "CONNECT":
        client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
        client.close()
        return
    with open(LOG, "a") as f:
        f.write(target + "\n")
    host, port = target.rsplit(":", 1)
    upstream = socket.create_connection((host, int(port)), timeout=30)
    upstream.settimeout(None)
    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    rest = head.split(b"\r\n\r\n", 1)[1]
    if rest:
        upstream.sendall(rest)
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
    pipe(client, upstream)


server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(16)
print("PORT", server.getsockname()[1], flush=True)
while True:
    conn, _ = server.accept()
    threading.Thread(target=handle, args=(conn,), daemon=True).start()
