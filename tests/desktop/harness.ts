// Drives goose Desktop's own client modules (bundled from a goose ui/desktop checkout by
// build.mjs) through the steps a Desktop user goes through, against one backend binary started
// the way Desktop starts it (Desktop's own gooseServe.ts). Prints one line per step:
//   PASS <step> (<ms>)   or   FAIL <step>: <Desktop's own error, e.g. its zod schema check>
// and a last line `RESULT <label> <passed>/<total>`. Configured by the environment
// (scripts/desktop-headless sets it): HEADLESS_BINARY, HEADLESS_LABEL, HEADLESS_HOME,
// HEADLESS_LLM (OpenAI-compatible base URL, llmock), HEADLESS_TLS (1 = --tls, as 1.45 does).
import { pinnedFingerprint, electronFetch, setAcpUrl } from './stubs/electron';
import { shownToasts } from './stubs/toasts';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { startGooseServe, type GooseServeResult } from 'desktop/gooseServe';
import { checkBackendStatus } from 'desktop/backendStatus';
import {
  getAcpClient,
  getAcpInitializeResponse,
  reconnectAcpAfterSystemResume,
} from 'desktop/acp/acpConnection';
import { createWebSocketStream } from 'desktop/acp/createWebSocketStream';
import { acpReadAllConfig, acpReadConfig, acpUpsertConfig } from 'desktop/acp/config';
import {
  acpListProviderDetails,
  acpReadProviderConfig,
  acpSaveProviderConfig,
  acpReadDefaults,
  acpSaveDefaults,
  acpReadThinkingEffort,
  acpSetSessionProviderModel,
} from 'desktop/acp/providers';
import { listSlashCommandItems, listAgentMentionItems } from 'desktop/acp/autocomplete';
import { getDiagnosticsReport } from 'desktop/acp/diagnostics';
import { listRecipes } from 'desktop/acp/recipe';
import { acpListSchedules } from 'desktop/acp/schedules';
import { fetchCanonicalModelInfo } from 'desktop/utils/canonical';
import { acpSteerSession } from 'desktop/acp/prompt';
import {
  getConfiguredExtensions,
  getConfiguredGooseExtensions,
  addConfigExtension,
  setConfigExtensionEnabled,
  removeConfigExtension,
} from 'desktop/acp/extensions';
import {
  getSessionExtensions,
  addSessionExtension,
  removeSessionExtension,
} from 'desktop/acp/session-extensions';
import { listTools, setToolPermissions } from 'desktop/acp/permissions';
import {
  acpListSessions,
  acpRenameSession,
  acpExportSession,
  acpForkSession,
  acpDeleteSession,
  acpUpdateWorkingDir,
  acpImportSession,
} from 'desktop/acp/sessions';
import { acpChatSessionController } from 'desktop/acp/chatSessionController';
import { acpChatSessionStore, acpChatSessionActions } from 'desktop/acp/chatSessionStore';
import { resolveAcpPermissionRequest } from 'desktop/acp/permissionRequests';
import { listSkillSources } from 'desktop/acp/sources';
import { acpListPrompts } from 'desktop/acp/prompts';
import { listMcpApps } from 'desktop/acp/mcp-apps';
import { getPendingToolConfirmationIds, getToolResponses } from 'desktop/types/message';
import { GooseClient, DEFAULT_GOOSE_MCP_HOST_CAPABILITIES } from '@aaif/goose-sdk';
import { PROTOCOL_VERSION } from '@agentclientprotocol/sdk';

const env = (k: string): string => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set (scripts/desktop-headless sets it)`);
  return v;
};
const label = env('HEADLESS_LABEL');
const home = env('HEADLESS_HOME');
const llm = env('HEADLESS_LLM');
const tls = process.env.HEADLESS_TLS !== '0';
process.env.GOOSE_BINARY = env('HEADLESS_BINARY');

let passed = 0;
let total = 0;
const results: { step: string; ok: boolean; detail: string }[] = [];

function describe(e: unknown): string {
  if (e && typeof e === 'object' && 'issues' in e && Array.isArray((e as { issues: unknown[] }).issues)) {
    // zod: Desktop's own schema check rejected the answer
    const issues = (e as { issues: { path: unknown[]; message: string; code?: string }[] }).issues;
    const seen = new Map<string, number>();
    for (const i of issues) {
      const where = i.path.map((p) => (typeof p === 'number' ? '*' : String(p))).join('.') || '(root)';
      const key = `${where}: ${i.message}`;
      seen.set(key, (seen.get(key) ?? 0) + 1);
    }
    return 'schema check: ' + [...seen].map(([k, n]) => (n > 1 ? `${k} (x${n})` : k)).join('; ');
  }
  if (e instanceof Error) {
    const data = (e as Error & { data?: unknown }).data;
    return e.message + (data !== undefined ? ` ${JSON.stringify(data)}` : '');
  }
  if (e && typeof e === 'object') return JSON.stringify(e);
  return String(e);
}

async function step<T>(name: string, fn: () => Promise<T>): Promise<T | undefined> {
  total += 1;
  const t0 = performance.now();
  const before = shownToasts.length;
  try {
    const value = await withDeadline(fn(), 60_000, `${name} did not finish within 60 s`);
    const toasts = shownToasts.slice(before).filter((t) => t.kind === 'error');
    if (toasts.length > 0) throw new Error(`error toast: ${JSON.stringify(toasts[0].detail)}`);
    passed += 1;
    const ms = Math.round(performance.now() - t0);
    console.log(`PASS ${name} (${ms} ms)`);
    results.push({ step: name, ok: true, detail: `${ms} ms` });
    return value;
  } catch (e) {
    const detail = describe(e).replace(/\s+/g, ' ').slice(0, 600);
    console.log(`FAIL ${name}: ${detail}`);
    results.push({ step: name, ok: false, detail });
    return undefined;
  }
}

function check(cond: unknown, what: string): void {
  if (!cond) throw new Error(what);
}

async function withDeadline<T>(p: Promise<T>, ms: number, msg: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<T>((_, reject) => {
        timer = setTimeout(() => reject(new Error(msg)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function until(what: string, ms: number, probe: () => boolean): Promise<void> {
  const end = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function llmock(behaviors: unknown[]): Promise<void> {
  const r = await fetch(`${llm}/_llmock/scenario`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ behaviors }),
  });
  if (r.status !== 201) throw new Error(`llmock refused the scenario: ${r.status} ${await r.text()}`);
}

function userMessage(text: string) {
  return {
    id: crypto.randomUUID(),
    role: 'user' as const,
    created: Math.floor(Date.now() / 1000),
    content: [{ type: 'text' as const, text }],
    metadata: { userVisible: true, agentVisible: true },
  };
}

function snapshot(sessionId: string) {
  return acpChatSessionStore.getSnapshot(sessionId);
}

function textOf(sessionId: string): string {
  return JSON.stringify(snapshot(sessionId)?.messages ?? []);
}

function pendingConfirmation(sessionId: string): string | null {
  const [first] = getPendingToolConfirmationIds(snapshot(sessionId)?.messages ?? []);
  return first ?? null;
}

/** Runs a turn to its end, answering every tool permission Desktop shows with "allow once"
 * (the model may call a tool on any turn; a title request can take a scripted reply). */
async function approving<T>(sessionId: string, turn: Promise<T>): Promise<T> {
  let settled = false;
  const answering = (async () => {
    while (!settled) {
      const id = pendingConfirmation(sessionId);
      if (id) resolveAcpPermissionRequest(sessionId, id, 'allow_once');
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    return await turn;
  } finally {
    settled = true;
    await answering;
  }
}

async function submit(sessionId: string, text: string): Promise<string | undefined> {
  let finished: string | undefined;
  await acpChatSessionController.submitMessage(sessionId, userMessage(text) as never, {
    getCurrentSnapshot: () => snapshot(sessionId),
    onFinish: (error?: string) => {
      finished = error ?? 'ok';
    },
  } as never);
  return finished;
}

async function main(): Promise<void> {
  const cwd = path.join(home, 'project');
  fs.mkdirSync(cwd, { recursive: true });
  const secret = crypto.randomBytes(32).toString('hex');
  const serveEnv = {
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    XDG_STATE_HOME: path.join(home, '.local', 'state'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    GOOSE_PATH_ROOT: path.join(home, 'goose-root'),
    GOOSE_DISABLE_KEYRING: '1',
    GOOSE_TELEMETRY_ENABLED: 'false',
  };
  for (const k of Object.keys(process.env)) {
    if (/^(GOOSE_|OPENAI_|ANTHROPIC_|GOSLING_)/.test(k) && k !== 'GOOSE_BINARY') delete process.env[k];
  }
  const quiet = { info: () => {}, error: (...a: unknown[]) => console.error(`[${label} serve]`, ...a) };
  const servers: GooseServeResult[] = [];

  // 1. Start-up, as Desktop's main process does it (gooseServe.ts, then the pin check of main.ts).
  const serve = await step('start-up: goose serve spawn, /status readiness, pinned certificate', async () => {
    const s = await startGooseServe({
      dir: cwd,
      serverSecret: secret,
      tls,
      env: serveEnv,
      logger: quiet,
      readinessFetch: electronFetch as never,
    });
    servers.push(s);
    if (tls) {
      check(s.certFingerprint, 'no GOOSED_CERT_FINGERPRINT= line on stdout');
      check(
        s.certFingerprint === pinnedFingerprint(),
        `GOOSED_CERT_FINGERPRINT ${s.certFingerprint} differs from the pinned certificate ${pinnedFingerprint()} ("Goose Failed to Start")`
      );
    }
    return s;
  });
  if (!serve) return finish(servers);
  setAcpUrl(serve.acpUrl, secret);
  const base = serve.acpUrl.replace(/^ws/, 'http').replace(/\/acp\?.*$/, '');

  await step('external-backend probe (backendStatus: /status, then 406 on GET /acp)', async () => {
    const errorLog: string[] = [];
    const ok = await checkBackendStatus({ baseUrl: base, serverSecret: secret, fetch: electronFetch as never, errorLog });
    check(ok, `checkBackendStatus gave up: ${errorLog.join(' | ')}`);
  });

  await step('initialize over the WebSocket', async () => {
    await getAcpClient();
    const init = await getAcpInitializeResponse();
    check(init.protocolVersion === PROTOCOL_VERSION, `protocolVersion ${init.protocolVersion}`);
  });
  await step('start-up: config read-all', async () => {
    await acpReadAllConfig();
  });

  // 2. Onboarding: the welcome screen shows when no default provider is set.
  await step('onboarding: defaults read (empty: welcome screen)', async () => {
    const d = await acpReadDefaults();
    check(!d.providerId, `a fresh install already has provider ${d.providerId}`);
  });
  await step('onboarding: providers list', async () => {
    const list = await acpListProviderDetails();
    check(list.some((p) => p.name === 'openai'), `no openai provider among ${list.map((p) => p.name).join(',')}`);
  });
  await step('onboarding: provider config read (openai)', async () => {
    await acpReadProviderConfig('openai');
  });
  await step('onboarding: provider config save (OPENAI_HOST, OPENAI_API_KEY)', async () => {
    await acpSaveProviderConfig('openai', [
      { key: 'OPENAI_HOST', value: llm },
      { key: 'OPENAI_API_KEY', value: 'sk-headless-test' },
    ]);
  });
  await step('onboarding: defaults save, then read back', async () => {
    await acpSaveDefaults('openai', 'gpt-4o-mini');
    const d = await acpReadDefaults();
    check(d.providerId === 'openai' && d.modelId === 'gpt-4o-mini', `read back ${JSON.stringify(d)}`);
  });

  // 3. Settings.
  await step('settings: GOOSE_MODE upsert approve, read back', async () => {
    await acpUpsertConfig('GOOSE_MODE', 'approve', false);
    const v = await acpReadConfig('GOOSE_MODE', false);
    check(v === 'approve', `read back ${JSON.stringify(v)}`);
  });
  await step('settings: thinking effort preference read', async () => {
    await acpReadThinkingEffort();
  });

  // 4. Extensions page.
  await step('extensions: list configured', async () => {
    await getConfiguredExtensions();
  });
  // a real MCP server (the reference memory server from the test peers), as a user adds one
  const probe = {
    type: 'stdio',
    name: 'headlessprobe',
    description: 'headless probe',
    cmd: env('HEADLESS_MCP_NODE'),
    args: [env('HEADLESS_MCP_SCRIPT')],
    envs: {},
    env_keys: [],
    timeout: 30,
  };
  await step('extensions: add, disable, enable, remove (stdio)', async () => {
    await addConfigExtension(probe as never, false);
    let listed = (await getConfiguredExtensions()).extensions as { name?: string; enabled?: boolean; configKey?: string }[];
    const entry = listed.find((e) => e.name === 'headlessprobe');
    check(entry, `added extension not listed: ${JSON.stringify(listed)}`);
    const key = entry!.configKey ?? 'headlessprobe';
    await setConfigExtensionEnabled(key, true);
    await setConfigExtensionEnabled(key, false);
    await removeConfigExtension(key);
    listed = (await getConfiguredExtensions()).extensions as { name?: string }[];
    check(!listed.some((e) => e.name === 'headlessprobe'), 'removed extension still listed');
  });

  // 5. A new chat with the enabled extensions, as the new-chat path does.
  const session = await step('chat: new session with enabled extensions, then session info', async () => {
    const enabled = (await getConfiguredGooseExtensions()).filter((e) => e.enabled).map((e) => e.extension);
    return await acpChatSessionController.createSession(cwd, enabled);
  });
  const sid = session?.id;
  if (!sid) return finish(servers);
  await step('chat: session extensions list', async () => {
    await getSessionExtensions(sid);
  });
  await step('chat: tools list (tool permission page)', async () => {
    const tools = await listTools(sid);
    check(tools.length > 0, 'no tools');
  });

  await step('chat: model picker (session provider, then model)', async () => {
    const applied = await acpSetSessionProviderModel(sid, 'openai', 'gpt-4o-mini');
    check(applied.modelId === 'gpt-4o-mini', `the session reports ${JSON.stringify(applied)}`);
  });
  await step('chat: composer autocomplete (slash commands, @-mentions)', async () => {
    await listSlashCommandItems(cwd);
    await listAgentMentionItems(cwd, sid);
  });
  await step('chat: add an extension to the session, then remove it', async () => {
    await addSessionExtension(sid, probe as never);
    const names = (await getSessionExtensions(sid)).map((e) => e.name);
    check(names.includes('headlessprobe'), `the session's extensions are ${names.join(', ')}`);
    await removeSessionExtension(sid, 'headlessprobe');
    const after = (await getSessionExtensions(sid)).map((e) => e.name);
    check(!after.includes('headlessprobe'), 'the removed extension is still on the session');
  });
  await step('settings: tool permission (ask before) set', async () => {
    const tools = await listTools(sid);
    check(tools.length > 0, 'no tools');
    await setToolPermissions([{ toolName: tools[0].name, permission: 'ask_before' }]);
  });
  await step('chat: working directory change', async () => {
    const other = path.join(home, 'other');
    fs.mkdirSync(other, { recursive: true });
    await acpUpdateWorkingDir(sid, other);
    await acpUpdateWorkingDir(sid, cwd);
  });
  await step('chat: prompt with a tool call and a permission (allow once)', async () => {
    const done = submit(sid, 'please run a shell command to list the files');
    await until('the permission request', 30_000, () => pendingConfirmation(sid) !== null);
    check(resolveAcpPermissionRequest(sid, pendingConfirmation(sid)!, 'allow_once'), 'no pending permission to resolve');
    const r = await done;
    check(r === 'ok', `turn ended with ${r}`);
    const msgs = snapshot(sid)?.messages ?? [];
    check(msgs.some((m) => m.role === 'assistant'), 'no assistant message');
    check(msgs.some((m) => getToolResponses(m).length > 0), 'no tool result shown');
  });
  await step('chat: plain prompt and answer', async () => {
    await llmock([{ type: 'reply', text: 'Zebras have stripes.' }]);
    const r = await approving(sid, submit(sid, 'say something about zebras'));
    check(r === 'ok', `turn ended with ${r}`);
  });

  await step('chat: context meter (canonical model info, then provider known models)', async () => {
    // ChatInput's token limit: canonical model info first, then the provider's known models
    const info = await fetchCanonicalModelInfo('openai', 'gpt-4o-mini');
    let limit = info?.contextLimit ?? 0;
    if (!limit) {
      const openai = (await acpListProviderDetails()).find((p) => p.name === 'openai');
      limit = openai?.metadata?.known_models?.find((m) => m.name === 'gpt-4o-mini')?.context_limit ?? 0;
    }
    check(limit > 0, 'no context limit for gpt-4o-mini: the meter shows none');
  });

  // A slow turn: steer it, then stop it.
  await llmock([{ type: 'slow_first_token', seconds: 8 }]);
  const t0 = performance.now();
  let running: Promise<string | undefined> | undefined;
  await step('chat: a slow turn starts', async () => {
    running = submit(sid, 'this turn will be stopped');
    await until('the turn to start', 5_000, () => !!snapshot(sid)?.activePromptAttemptId);
  });
  let steerId: string | undefined;
  await step('chat: steer the running turn (activeRunId, session/steer)', async () => {
    await until('session_info_update with _meta.goose.activeRunId', 3_000, () => !!snapshot(sid)?.activeRunId);
    const steered = userMessage('also mention giraffes');
    const response = await acpSteerSession(sid, steered as never, snapshot(sid)!.activeRunId!);
    // What Desktop's useChatSession hook (React, not run here) does with the answer: the
    // message is shown at once, pending until the server confirms the steer.
    steerId = response.messageId;
    if (!snapshot(sid)?.messages.some((m) => m.id === steerId)) {
      acpChatSessionActions.addPendingLocalSteerMessage(sid, {
        ...steered,
        id: steerId,
        metadata: { ...steered.metadata, steer: true },
      } as never);
    }
  });
  await step('chat: cancel the running turn (stop)', async () => {
    check(running, 'no running turn');
    const t1 = performance.now();
    acpChatSessionController.stop(sid);
    await running;
    const ms = Math.round(performance.now() - t1);
    check(performance.now() - t0 < 7_000, 'the turn ran to its end instead of stopping');
    check(!snapshot(sid)?.activePromptAttemptId, 'still running');
    // Desktop drops a steered message still unconfirmed when the turn ends.
    check(
      snapshot(sid)?.messages.some((m) => m.id === steerId),
      'the steered message left the chat: its steer was never confirmed (_meta.goose.queuedSteer)'
    );
    console.log(`      the prompt's answer came ${ms} ms after stop`);
  });

  // 6. History: list, search by what was said, rename, export.
  await step('history: list sessions', async () => {
    const page = await acpListSessions();
    check(page.sessions.some((s) => s.id === sid), 'the new session is not listed');
  });
  await step('history: search by message text', async () => {
    const page = await acpListSessions(null, { keyword: 'zebras' });
    check(page.sessions.some((s) => s.id === sid), 'searching for a word the user said finds nothing');
  });
  await step('history: rename', async () => {
    await acpRenameSession(sid, 'Headless chat');
    const page = await acpListSessions();
    check(page.sessions.find((s) => s.id === sid)?.name === 'Headless chat', 'the new title is not listed');
  });
  await step('history: export', async () => {
    const data = await acpExportSession(sid);
    check(data.includes('zebras'), 'the export lacks the conversation');
  });

  await step('history: import the exported session', async () => {
    const data = await acpExportSession(sid);
    const before = (await acpListSessions()).sessions.length;
    await acpImportSession(data, 'json');
    const after = (await acpListSessions()).sessions.length;
    check(after === before + 1, `${before} sessions before the import, ${after} after`);
  });

  // 7. Reconnect (resume from sleep) and load the session again.
  const before = (snapshot(sid)?.messages ?? []).length;
  await step('reconnect and load: new WebSocket, new initialize, session/load replay', async () => {
    reconnectAcpAfterSystemResume();
    await getAcpClient();
    acpChatSessionActions.deleteSnapshot(sid);
    await acpChatSessionController.restoreSession(sid);
    const s = snapshot(sid);
    check(!s?.sessionLoadError, `load failed: ${s?.sessionLoadError}`);
    check((s?.messages.length ?? 0) >= before - 1 && before > 0, `replayed ${s?.messages.length} of ${before} messages`);
    console.log(`      ${before} messages before, ${s?.messages.length} after the replay`);
  });

  // 8. A second window: its own backend on the same data, its own connection.
  await step('second window: own serve process, list and load the first window\'s session', async () => {
    const s2 = await startGooseServe({ dir: cwd, serverSecret: secret, tls, env: serveEnv, logger: quiet, readinessFetch: electronFetch as never });
    servers.push(s2);
    const stream = createWebSocketStream(s2.acpUrl);
    const updates: unknown[] = [];
    const client = new GooseClient(
      () => ({
        requestPermission: async () => ({ outcome: { outcome: 'cancelled' } }),
        sessionUpdate: async (n: unknown) => void updates.push(n),
        unstable_sessionUpdate: async () => {},
      }) as never,
      stream
    );
    try {
      await client.initialize({
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: { _meta: { goose: { mcpHostCapabilities: DEFAULT_GOOSE_MCP_HOST_CAPABILITIES, customNotifications: true } } },
        clientInfo: { name: 'goose-app', version: '1.45.0' },
      } as never);
      const list = await client.listSessions({ _meta: { types: ['user', 'scheduled'] } } as never);
      check(list.sessions.some((x: { sessionId: string }) => x.sessionId === sid), 'the second window does not list the session');
      const info = await client.goose.sessionInfo_unstable({ sessionId: sid });
      await client.loadSession({ sessionId: sid, cwd: info.session.cwd, mcpServers: [] });
      check(updates.length > 0, 'the load replayed nothing');
    } finally {
      stream.close();
    }
  });

  // 9. Fork (duplicate) and edit a sent message.
  await step('fork / duplicate session', async () => {
    const forked = await acpForkSession(sid);
    check(forked && forked !== sid, `fork answered ${forked}`);
  });
  await step('edit a sent message (truncate, resend)', async () => {
    const msgs = snapshot(sid)?.messages ?? [];
    const first = msgs.find((m) => m.role === 'user');
    check(first, 'no user message to edit');
    let finished: string | undefined;
    await approving(
      sid,
      acpChatSessionController.updateMessage(sid, first!.id, 'an edited question about zebras', 'edit', [], {
        getCurrentSnapshot: () => snapshot(sid),
        onFinish: (e?: string) => {
          finished = e ?? 'ok';
        },
      } as never)
    );
    check(finished === 'ok', `the resent turn ended with ${finished}`);
  });

  // 10. Pages that list things.
  await step('skills page: sources list', async () => {
    await listSkillSources(cwd);
  });
  await step('prompts settings: prompts list', async () => {
    await acpListPrompts();
  });
  await step('apps page: apps list', async () => {
    await listMcpApps(sid);
  });
  await step('recipes page: list', async () => {
    await listRecipes();
  });
  await step('scheduler page: list', async () => {
    await acpListSchedules();
  });
  await step('diagnostics: summary report', async () => {
    await getDiagnosticsReport(sid, 'summary');
  });
  await step('history: delete session', async () => {
    await acpDeleteSession(sid);
    const page = await acpListSessions();
    check(!page.sessions.some((s) => s.id === sid), 'deleted session still listed');
  });

  return finish(servers);
}

async function finish(servers: GooseServeResult[]): Promise<void> {
  for (const s of servers) await s.cleanup().catch(() => {});
  console.log(`RESULT ${label} ${passed}/${total}`);
  fs.writeFileSync(path.join(home, 'results.json'), JSON.stringify({ label, passed, total, results }, null, 1));
  process.exit(passed === total ? 0 : 1);
}

main().catch((e) => {
  console.log(`FAIL harness: ${describe(e)}`);
  process.exit(2);
});
