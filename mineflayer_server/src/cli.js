'use strict'
// Command-line arguments of the sidecar (kept apart from the entry point, which takes over stdout).

const USAGE = 'usage: node src/sidecar.js --endpoint tcp://127.0.0.1:<port>|ipc://<path> --rules DIR [--agents a,b] ' +
  '[--server embedded|external] [--mc-host 127.0.0.1] [--mc-port 0] [--arenas 1] [--max-arenas 16] [--arena-x0 0] ' +
  '[--cook-ticks 200] [--skill-timeout-ms 20000] [--spawn-timeout-ms 40000] [--parent-pid PID] [--client-key HEX] [--test-ops]'

const DEFAULTS = Object.freeze({
  endpoint: null,
  rules: null,
  agents: 'agent_a,agent_b',
  server: 'embedded',
  'mc-host': '127.0.0.1',
  'mc-port': '0',
  arenas: '1',
  'max-arenas': '16',
  'arena-x0': '0',
  'cook-ticks': '200',
  'skill-timeout-ms': '20000',
  'spawn-timeout-ms': '', // empty: bots.js SPAWN_TIMEOUT_MS
  'parent-pid': '',
  'client-key': ''
})
/** Flags without a value. */
const SWITCHES = Object.freeze(['test-ops'])

/** Parse `--name value` pairs and switches; unknown flags are an error so typos do not pass silently. */
function parseArgs (argv) {
  const opts = { ...DEFAULTS }
  const switches = new Set()
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]
    const name = flag.startsWith('--') ? flag.slice(2) : null
    if (name !== null && SWITCHES.includes(name)) { switches.add(name); continue }
    if (name === null || !(name in DEFAULTS) || argv[i + 1] === undefined) throw new Error(`bad argument ${flag}\n${USAGE}`)
    opts[name] = argv[++i]
  }
  if (!opts.endpoint) throw new Error(`--endpoint is required\n${USAGE}`)
  if (!opts.rules) throw new Error(`--rules is required: the directory of skill_ops.json and recipes.json (the Python package's gencoord_env/data)\n${USAGE}`)
  const int = name => {
    const n = Number(opts[name])
    if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a non-negative integer\n${USAGE}`)
    return n
  }
  const arenas = int('arenas')
  const maxArenas = int('max-arenas')
  if (maxArenas < 1 || maxArenas > 64) throw new Error(`--max-arenas must be 1-64, got ${maxArenas}\n${USAGE}`)
  if (arenas > maxArenas) throw new Error(`--arenas ${arenas} exceeds --max-arenas ${maxArenas}\n${USAGE}`)
  const arenaX0 = Number(opts['arena-x0'])
  if (!Number.isInteger(arenaX0) || Math.abs(arenaX0) > 1000000) throw new Error(`--arena-x0 must be an integer block x, got ${opts['arena-x0']}\n${USAGE}`)
  if (!['embedded', 'external'].includes(opts.server)) throw new Error(`--server must be embedded or external, got ${opts.server}\n${USAGE}`)
  const mcPort = int('mc-port')
  if (opts.server === 'external' && (mcPort === 0 || mcPort > 65535)) {
    throw new Error(`--server external needs --mc-port: the port of a running Minecraft 1.21.4 server in offline mode\n${USAGE}`)
  }
  if (!/^[A-Za-z0-9.:[\]-]{1,253}$/.test(opts['mc-host'])) throw new Error(`--mc-host ${JSON.stringify(opts['mc-host'])} is not a host name or address\n${USAGE}`)
  if (opts.server === 'embedded' && opts['mc-host'] !== DEFAULTS['mc-host']) {
    throw new Error(`--mc-host applies to --server external; the embedded server listens on 127.0.0.1 only\n${USAGE}`)
  }
  const endpoint = checkEndpoint(opts.endpoint)
  if (endpoint.startsWith('tcp://') && !/^[0-9a-fA-F]{64}$/.test(opts['client-key'])) {
    throw new Error(`a tcp endpoint needs --client-key: the CURVE public key (64 hex digits) of the only client the sidecar admits\n${USAGE}`)
  }
  if (!endpoint.startsWith('tcp://') && opts['client-key']) throw new Error(`--client-key applies to a tcp endpoint; an ipc socket is guarded by its folder\n${USAGE}`)
  return {
    endpoint,
    rulesDir: opts.rules,
    agents: opts.agents.split(',').filter(Boolean),
    server: opts.server,
    mcHost: opts['mc-host'],
    mcPort,
    arenas,
    maxArenas,
    arenaX0,
    cookTicks: int('cook-ticks'),
    skillTimeoutMs: int('skill-timeout-ms'),
    spawnTimeoutMs: opts['spawn-timeout-ms'] ? int('spawn-timeout-ms') : undefined,
    parentPid: opts['parent-pid'] ? int('parent-pid') : null,
    clientKey: opts['client-key'] || null,
    testOps: switches.has('test-ops')
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
