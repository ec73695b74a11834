// Bundles the harness with goose Desktop's own client modules taken from a goose checkout.
// Only two things are replaced: Desktop's toast UI (src/toasts.tsx) by stubs/toasts.ts, and
// Electron, which is not imported by these modules but provided as `window` (stubs/electron.ts).
// usage: node build.mjs <goose ui/desktop dir> <out file>
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
const [desktopDir, outFile] = process.argv.slice(2);
const src = path.join(desktopDir, 'src');
const sdk = path.join(desktopDir, '..', 'sdk', 'src', 'index.ts');
for (const need of [path.join(src, 'acp', 'acpConnection.ts'), sdk]) {
  if (!fs.existsSync(need)) {
    console.error(`not a goose ui/desktop checkout: ${need} is missing`);
    process.exit(2);
  }
}
const toasts = path.join(src, 'toasts.tsx');
// esbuild is installed (pinned) beside the output, in target/, not in the repository
const esbuild = createRequire(path.resolve(outFile))('esbuild');

const substitutes = {
  name: 'desktop-substitutes',
  setup(build) {
    build.onResolve({ filter: /^desktop\// }, (args) => ({
      path: resolveTs(path.join(src, args.path.slice('desktop/'.length))),
    }));
    build.onResolve({ filter: /toasts$/ }, (args) => {
      const target = resolveTs(path.resolve(args.resolveDir, args.path));
      return target === toasts ? { path: path.join(here, 'stubs', 'toasts.ts') } : undefined;
    });
    build.onResolve({ filter: /^@aaif\/goose-sdk$/ }, () => ({ path: sdk }));
  },
};

function resolveTs(base) {
  for (const ext of ['', '.ts', '.tsx', '/index.ts']) {
    if (fs.existsSync(base + ext) && fs.statSync(base + ext).isFile()) return base + ext;
  }
  return base;
}

await esbuild.build({
  entryPoints: [path.join(here, 'harness.ts')],
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node22',
  outfile: outFile,
  nodePaths: [path.join(path.dirname(outFile), 'node_modules')],
  plugins: [substitutes],
  logLevel: 'warning',
  banner: {
    js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
  },
});
