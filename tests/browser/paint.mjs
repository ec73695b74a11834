// First contentful paint of the web page, against the browser's own floor on the same machine.
//
// Headless Chromium's time to first paint on a loaded 2-vCPU VM moves by tens of milliseconds
// from one load to the next and from one machine to another, whatever the page. So each load
// of gosling's page is paired with a load of a one-line page served from the same host (the
// floor: what the browser needs to paint anything at all), and the figure that belongs to the
// page is the difference of the two best loads.
//
//   paintVsFloor(page, url, loads) -> { page, floor, own, pageLoads, floorLoads }   (ms)
//
// Run directly (scripts/bench does, row `paint`), it starts the gosling binary named by BIN
// and headless Chromium (CHROMIUM) itself and prints that object as JSON.
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

function floorServer() {
  const srv = http.createServer((_, res) => {
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
    res.end("<!doctype html><meta charset=utf-8><title>floor</title><p>floor</p>");
  });
  return new Promise((resolve) => srv.listen(0, "127.0.0.1", () => resolve(srv)));
}

async function firstPaint(page, url) {
  await page.goto(url);
  await page.waitForFunction(() => performance.getEntriesByType("paint").length > 0);
  return page.evaluate(() => {
    const paints = performance.getEntriesByType("paint");
    const e = paints.find((x) => x.name === "first-contentful-paint") || paints[0];
    return e.startTime;
  });
}

// Interleaved loads, each a same-site navigation (no renderer process start in the figure).
export async function paintVsFloor(page, url, loads) {
  const srv = await floorServer();
  const floorUrl = "http://127.0.0.1:" + srv.address().port + "/";
  const pageLoads = [];
  const floorLoads = [];
  try {
    for (let i = 0; i < loads; i++) {
      floorLoads.push(await firstPaint(page, floorUrl + "?load=" + i));
      pageLoads.push(await firstPaint(page, url + "?load=" + i));
    }
  } finally {
    srv.close();
  }
  const best = (xs) => Math.min(...xs);
  return { page: best(pageLoads), floor: best(floorLoads), own: best(pageLoads) - best(floorLoads), pageLoads, floorLoads };
}

async function standalone() {
  const { chromium } = createRequire(import.meta.url)("playwright-core");
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gosling-paint-"));
  const env = Object.assign({}, process.env, {
    GOSLING_CONFIG_DIR: path.join(tmp, "config"),
    GOSLING_STATE_DIR: path.join(tmp, "state"),
    HOME: tmp,
    GOOSE_SERVER__SECRET_KEY: "paint-bench-secret-0123456789",
    GOOSE_TLS: "false",
    RUST_LOG: "warn",
  });
  const srv = spawn(process.env.BIN, ["agent", "--port", "0"], { env, stdio: ["ignore", "pipe", "inherit"] });
  try {
    const base = await new Promise((resolve, reject) => {
      let out = "";
      srv.stdout.on("data", (d) => {
        out += d;
        const m = /listening on (http:\/\/[^\s/]+)/.exec(out);
        if (m) resolve(m[1]);
      });
      srv.on("exit", (code) => reject(new Error("gosling exited early: " + code)));
    });
    const ctx = await chromium.launchPersistentContext(path.join(tmp, "profile"), {
      executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
      headless: true,
      viewport: { width: 1280, height: 800 },
    });
    const page = ctx.pages()[0] || await ctx.newPage();
    await firstPaint(page, base + "/"); // the first load of a profile warms its caches
    console.log(JSON.stringify(await paintVsFloor(page, base + "/", Number(process.env.LOADS || 20))));
    await ctx.close();
  } finally {
    srv.kill("SIGTERM");
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === new URL("file://" + process.argv[1]).href) {
  standalone().catch((e) => { console.error(e); process.exit(1); });
}
