#!/usr/bin/env node
// The `turnkit` executable (package.json "bin"): everything else is in main.ts.
import { main } from './main.js';

process.exitCode = await main(process.argv.slice(2));
