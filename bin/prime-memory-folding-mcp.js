#!/usr/bin/env node
// Start the Prime Memory Folding MCP server (a Python program) from Node, so that
// `npx prime-memory-folding-mcp` works in hosts that launch MCP servers with npx.
//
// Python is found through PRIME_MEMORY_PYTHON, else python3, else python.
// Arguments, stdio and signals pass straight through; the exit code is the server's.
"use strict";

const { spawn, spawnSync } = require("node:child_process");
const path = require("node:path");

const MODULE = "prime_memory_folding.mcp_server";
const CHECK = [
  "-c",
  "import importlib.util as u, sys; " +
    "sys.exit(0 if u.find_spec('prime_memory_folding') and u.find_spec('mcp') else 3)",
];
const FIX =
  "prime-memory-folding-mcp: the Python package is missing; run " +
  `\`python3 -m pip install ${path.resolve(__dirname, "..")}\`` +
  " (or set PRIME_MEMORY_PYTHON to a Python that has it)";

function candidates() {
  const chosen = process.env.PRIME_MEMORY_PYTHON;
  if (chosen) return [chosen];
  return process.platform === "win32" ? ["python", "py", "python3"] : ["python3", "python"];
}

function findPython() {
  let found = null;
  for (const python of candidates()) {
    const probe = spawnSync(python, CHECK, { stdio: ["ignore", "ignore", "ignore"] });
    if (probe.error) continue; // not installed under this name
    if (probe.status === 0) return { python };
    found = found || python;
  }
  return { missing: found };
}

function main() {
  const { python, missing } = findPython();
  if (!python) {
    if (missing) {
      process.stderr.write(`${FIX}\n`);
    } else {
      const names = candidates().join(", ");
      process.stderr.write(
        `prime-memory-folding-mcp: no Python found (tried ${names}); install Python 3.10+ ` +
          "or set PRIME_MEMORY_PYTHON to its path\n",
      );
    }
    process.exit(127);
  }

  const child = spawn(python, ["-m", MODULE, ...process.argv.slice(2)], { stdio: "inherit" });
  const forward = (signal) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => forward(signal));

  child.on("error", (error) => {
    process.stderr.write(`prime-memory-folding-mcp: could not start ${python}: ${error.message}\n`);
    process.exit(127);
  });
  child.on("exit", (code, signal) => {
    if (signal) {
      // Die of the same signal, so our parent sees what happened to the server.
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
      return;
    }
    process.exit(code === null ? 1 : code);
  });
}

main();
