/* global URL, console, performance */
// `npm run build`, after tsc: writes the prebuilt workflow bundles, plain and traced, into dist/
// (next to dist/worker.js, where createWorker looks for them), so that a worker's start loads
// them instead of bundling the workflow code at boot (docs/decisions/034-bundles-and-worker-versioning.md).
import { writeTurnWorkflowBundles } from '../dist/worker.js';

const dist = new URL('../dist/', import.meta.url).pathname;
const started = performance.now();
const written = await writeTurnWorkflowBundles(dist);
console.log(
  `turnkit: workflow bundles ${written.plain}, ${written.traced} in ${Math.round(performance.now() - started)} ms`,
);
