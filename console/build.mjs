// Builds the console into ../internal/console/dist (committed, embedded by
// go:embed). Deterministic: no timestamps, no source maps, fixed names, so
// internal/console's TestBuildMatchesSources can rebuild and compare bytes.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

// CONSOLE_OUT (a directory) lets the freshness test build elsewhere.
const out = (process.env.CONSOLE_OUT || new URL("../internal/console/dist", import.meta.url).pathname).replace(/\/?$/, "/");
mkdirSync(out, { recursive: true });
await esbuild.build({
  entryPoints: { app: "src/main.js" },
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  platform: "browser",
  outdir: out,
  legalComments: "none",
  logLevel: "warning",
  // The SDK reads its API key from process.env when none is given; the
  // browser has no process and the console always passes the key.
  define: { "process.env.NODE_ENV": '"production"' },
});
copyFileSync("src/index.html", out + "index.html");
copyFileSync("src/app.css", out + "app.css");
copyFileSync("src/icon.svg", out + "icon.svg");
