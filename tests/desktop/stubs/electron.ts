// What Electron gives goose Desktop's renderer and main process, re-implemented for Node:
// `window` (an EventTarget with `electron`, `WebSocket`, the web streams), and the main
// process's certificate pinning: the first TLS handshake with 127.0.0.1 pins the server's
// certificate (trust on first use, as Desktop's trust record does), every later connection
// must present the same one, and Desktop then compares it with the GOOSED_CERT_FINGERPRINT line.
import https from 'node:https';
import http from 'node:http';
import type { TLSSocket } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import WebSocketImpl from 'ws';

let pinned: string | null = null;
let acpUrl: string | null = null;
let secretKey = '';

export function pinnedFingerprint(): string | null {
  return pinned;
}

export function setAcpUrl(url: string | null, secret: string): void {
  acpUrl = url;
  secretKey = secret;
}

export function resetPin(): void {
  pinned = null;
}

function checkPeer(socket: TLSSocket): void {
  const raw = socket.getPeerCertificate(false)?.raw;
  if (!raw) throw new Error('the server presented no certificate');
  const fp = new X509Certificate(raw).fingerprint256.toUpperCase();
  if (pinned === null) pinned = fp;
  else if (pinned !== fp) throw new Error(`certificate ${fp} does not match the pinned ${pinned}`);
}

/** Electron's `net.fetch` as Desktop's main process uses it (GET only, small bodies). */
export async function electronFetch(input: string | URL, init: RequestInit = {}): Promise<Response> {
  const url = new URL(String(input));
  const lib = url.protocol === 'https:' ? https : http;
  return await new Promise<Response>((resolve, reject) => {
    const req = lib.request(
      url,
      {
        method: init.method ?? 'GET',
        headers: init.headers as Record<string, string> | undefined,
        rejectUnauthorized: false,
        timeout: 5000,
        agent: false,
      },
      (res) => {
        try {
          if (url.protocol === 'https:') checkPeer(res.socket as TLSSocket);
        } catch (e) {
          res.destroy();
          reject(e);
          return;
        }
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 0 }))
        );
        res.on('error', reject);
      }
    );
    init.signal?.addEventListener('abort', () => req.destroy(new Error('aborted')));
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** The renderer's WebSocket: Chromium's, with the main process's pinned certificate. */
class PinnedWebSocket extends WebSocketImpl {
  constructor(url: string, protocols?: string | string[]) {
    super(url, protocols ?? [], {
      rejectUnauthorized: false,
      handshakeTimeout: 10000,
      headers: { Origin: 'file://' },
    });
    this.on('upgrade', (res) => {
      const socket = res.socket as TLSSocket;
      if (typeof socket.getPeerCertificate === 'function') {
        try {
          checkPeer(socket);
        } catch (e) {
          this.terminate();
          this.emit('error', e);
        }
      }
    });
  }
}

class Window extends EventTarget {}
const win = new Window() as unknown as Record<string, unknown>;
Object.assign(win, {
  WebSocket: PinnedWebSocket,
  ReadableStream,
  WritableStream,
  electron: {
    getAcpUrl: async () => acpUrl,
    getSecretKey: async () => secretKey,
    launchApp: async () => {},
    refreshApp: async () => {},
    closeApp: async () => {},
    logInfo: () => {},
  },
  appConfig: { get: () => undefined },
});
(globalThis as unknown as { window: unknown }).window = win;
