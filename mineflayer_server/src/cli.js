'use strict'
// Command-line arguments of the sidecar (kept apart from the entry point, which takes over stdout).

const { DEFAULT_MAX_BYTES } = require('./protocol')

const USAGE = 'usage: node src/sidecar.js --endpoint tcp://127.0.0.1:<port>|ipc://<path> [--agents a,b] [--mc-port 0] ' +
  '[--cook-ticks 200] [--max-bytes 1048576] [--skill-timeout-ms 20000] [--parent-pid PID]'

/** Parse `--name value` pairs; unknown flags are an error so typos do not pass silently. */
function parseArgs (argv) {
  const defaults = { endpoint: null, agents: 'agent_a,agent_b', 'mc-port': '0', 'cook-ticks': '200', 'max-bytes': String(DEFAULT_MAX_BYTES), 'skill-timeout-ms': '20000', 'parent-pid': '' }
  const opts = { ...defaults }
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i]
    if (!flag.startsWith('--') || !(flag.slice(2) in defaults) || argv[i + 1] === undefined) throw new Error(`bad argument ${flag}\n${USAGE}`)
    opts[flag.slice(2)] = argv[i + 1]
  }
  if (!opts.endpoint) throw new Error(`--endpoint is required\n${USAGE}`)
  const int = name => {
    const n = Number(opts[name])
    if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a non-negative integer\n${USAGE}`)
    return n
  }
  return {
    endpoint: checkEndpoint(opts.endpoint),
    agents: opts.agents.split(',').filter(Boolean),
    mcPort: int('mc-port'),
    cookTicks: int('cook-ticks'),
    maxBytes: int('max-bytes'),
    skillTimeoutMs: int('skill-timeout-ms'),
    parentPid: opts['parent-pid'] ? int('parent-pid') : null
  }
}

/** Only loopback tcp or a local ipc path: the sidecar must never listen on a network interface. */
function checkEndpoint (endpoint) {
  const tcp = /^tcp:\/\/(127\.0\.0\.1|localhost):(\d{1,5}|\*)$/.exec(endpoint)
  if (tcp) return `tcp://127.0.0.1:${tcp[2] === '0' ? '*' : tcp[2]}`
  if (/^ipc:\/\/.+/.test(endpoint)) return endpoint
  throw new Error(`endpoint ${endpoint} is neither tcp://127.0.0.1:<port> nor ipc://<path>; the sidecar binds loopback only`)
}

module.exports = { parseArgs, checkEndpoint, USAGE }
