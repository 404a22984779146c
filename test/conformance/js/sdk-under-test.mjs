// The JS SDK the suites run against, chosen by STEPGRAPH_JS_SDK_VERSION:
// "2.0.0" (default) is @langchain/langgraph-sdk, "1.15.0" the same package
// installed under the alias langgraph-sdk-protocol (package.json). Issue 15
// asks for both: 1.15.0 is npm's `latest`, 2.0.0 is marked deprecated.
// test/conformance/conformance_test.go runs every suite once per version.
// The loaded package's own version is checked, so a wrong install fails
// instead of testing the other version twice.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const packages = {
  "2.0.0": "@langchain/langgraph-sdk",
  "1.15.0": "langgraph-sdk-protocol",
};

export const version = process.env.STEPGRAPH_JS_SDK_VERSION || "2.0.0";
const name = packages[version];
if (!name) {
  throw new Error(`STEPGRAPH_JS_SDK_VERSION=${version}: want one of ${Object.keys(packages).join(", ")}`);
}
const require = createRequire(import.meta.url);
const installed = JSON.parse(
  readFileSync(require.resolve(`${name}/package.json`, { paths: [import.meta.dirname] }), "utf8"),
).version;
if (installed !== version) {
  throw new Error(`${name} is ${installed}, not ${version}: run \`make test-deps\``);
}

export const sdk = await import(name);
export const react = () => import(`${name}/react`);
export const Client = sdk.Client;
