// A small MCP server on the TypeScript SDK v2 (@modelcontextprotocol/server), for gosling's
// tests: stdio by default, `http PORT` for Streamable HTTP at /mcp. Dual-era, as the SDK is.
import http from 'node:http';
import { McpServer, createMcpHandler, inputRequired, acceptedContent } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

const added = [];
let notifyListChanged = () => {};
const servers = new Set();

function build() {
    const server = new McpServer({ name: 'ts2-peer', version: '2.4.0' }, { capabilities: { tools: { listChanged: true } } });
    server.registerTool('add', { description: 'Add two numbers', inputSchema: z.object({ a: z.number(), b: z.number() }) },
        async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
    server.registerTool('echo', { description: 'Echo the message back', inputSchema: z.object({ message: z.string() }) },
        async ({ message }) => ({ content: [{ type: 'text', text: message }] }));
    const nameSchema = z.object({ name: z.string() });
    server.registerTool('greet', { description: 'Greet the person, asking for their name', inputSchema: z.object({}) },
        async (_args, ctx) => {
            const who = acceptedContent(ctx.mcpReq.inputResponses, 'who', nameSchema);
            if (!who) {
                return inputRequired({ inputRequests: { who: inputRequired.elicit({ message: 'What is your name?', requestedSchema: nameSchema }) } });
            }
            return { content: [{ type: 'text', text: `Hello, ${who.name}!` }] };
        });
    server.registerTool('add_tool', { description: 'Add a tool called `name`', inputSchema: z.object({ name: z.string() }) },
        async ({ name }) => {
            added.push(name);
            for (const s of servers) register(s, name);
            notifyListChanged();
            return { content: [{ type: 'text', text: `added ${name}` }] };
        });
    for (const name of added) register(server, name);
    server.registerResource('greeting', 'greeting://world', { mimeType: 'text/plain' },
        async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'Hello, world!' }] }));
    server.registerPrompt('review', { argsSchema: z.object({ code: z.string() }) },
        ({ code }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Please review:\n${code}` } }] }));
    return server;
}

function register(server, name) {
    try {
        server.registerTool(name, { description: 'added at run time', inputSchema: z.object({ text: z.string().optional() }) },
            async ({ text }) => ({ content: [{ type: 'text', text: `${name}:${text ?? ''}` }] }));
    } catch { /* already there */ }
}

if (process.argv[2] === 'http') {
    const port = Number(process.argv[3] || 8000);
    const handler = createMcpHandler(() => build());
    notifyListChanged = () => handler.notify.toolsChanged();
    http.createServer(async (req, res) => {
        const chunks = [];
        for await (const c of req) chunks.push(c);
        const body = chunks.length ? Buffer.concat(chunks) : undefined;
        const request = new Request(`http://127.0.0.1:${port}${req.url}`, {
            method: req.method, headers: req.headers, body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
        });
        const response = await handler.fetch(request);
        res.writeHead(response.status, Object.fromEntries(response.headers));
        if (response.body) {
            for await (const chunk of response.body) res.write(chunk);
        }
        res.end();
    }).listen(port, '127.0.0.1');
} else {
    serveStdio(() => {
        const s = build();
        servers.add(s);
        notifyListChanged = () => s.sendToolListChanged?.();
        return s;
    });
}
