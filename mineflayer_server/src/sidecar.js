#!/usr/bin/env node
'use strict'
// Entry point: start the embedded server and the bots, bind one ZeroMQ ROUTER socket on loopback
// or ipc, print `READY <json>` on stdout, then answer requests until `shutdown`.
//
//   node src/sidecar.js --endpoint tcp://127.0.0.1:5555 [--agents agent_a,agent_b] [--mc-port 0]
//                       [--cook-ticks 200] [--max-bytes 1048576] [--skill-timeout-ms 20000] [--parent-pid PID]

// stdout belongs to the READY line alone: flying-squid's console prompt and any library chatter go to stderr.
const writeStdout = process.stdout.write.bind(process.stdout)
process.stdout.write = (chunk, encoding, cb) => process.stderr.write(chunk, encoding, cb)

const zmq = require('zeromq')
const { createLogger } = require('./log')
const { startServer, stopServer, MINECRAFT_VERSION } = require('./server')
const { World } = require('./world')
const { createOps, SIDECAR_VERSION } = require('./ops')
const { PROTOCOL_VERSION, DEFAULT_MAX_BYTES, ProtocolError, decodeRequest, encodeResult, encodeError } = require('./protocol')
const { SerialQueue } = require('./util')

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

async function main () {
  const started = Date.now()
  const opts = parseArgs(process.argv.slice(2))
  const log = createLogger()
  const { serv, port, floorY, api } = await startServer({ port: opts.mcPort, cookTicks: opts.cookTicks, log })
  log('sidecar', `flying-squid ${MINECRAFT_VERSION} on 127.0.0.1:${port}, floor y=${floorY}`)
  const world = new World({ serv, api, port, floorY, log, skillTimeoutMs: opts.skillTimeoutMs })
  await world.ensureBots(opts.agents)

  const sock = new zmq.Router()
  await sock.bind(opts.endpoint)
  const endpoint = sock.lastEndpoint
  const sendQueue = new SerialQueue() // a zeromq.js socket allows one pending send at a time

  let stopping = false
  async function shutdown (code = 0) {
    if (stopping) return
    stopping = true
    log('sidecar', 'shutting down')
    await sendQueue.run(() => {})
    await world.close()
    await Promise.race([stopServer(serv), new Promise(resolve => setTimeout(resolve, 1000))])
    sock.close()
    process.exit(code)
  }
  const ops = createOps(world, () => shutdown(0))
  process.on('SIGTERM', () => shutdown(0))
  process.on('SIGINT', () => shutdown(0))
  if (opts.parentPid) {
    setInterval(() => {
      try { process.kill(opts.parentPid, 0) } catch (err) { log('sidecar', `parent ${opts.parentPid} is gone`); shutdown(0) }
    }, 1000).unref()
  }

  async function handle (payload) {
    let id = null
    try {
      const request = decodeRequest(payload, opts.maxBytes)
      id = request.id
      const op = Object.hasOwn(ops, request.op) ? ops[request.op] : null
      if (!op) throw new ProtocolError('BadRequest', `unknown op ${JSON.stringify(request.op)}; ops are ${Object.keys(ops).join(', ')}`)
      return encodeResult(id, await op(request.args))
    } catch (err) {
      if (err instanceof ProtocolError) return encodeError(err.id ?? id, err.type, err.message)
      log('sidecar', `internal error: ${err && err.stack}`)
      return encodeError(id, 'Internal', String(err && err.message))
    }
  }

  writeStdout('READY ' + JSON.stringify({
    endpoint,
    protocol: PROTOCOL_VERSION,
    minecraft: MINECRAFT_VERSION,
    sidecar: SIDECAR_VERSION,
    agents: world.agents(),
    mc_port: port,
    floor_y: floorY,
    pid: process.pid,
    startup_ms: Date.now() - started
  }) + '\n')

  for await (const frames of sock) {
    // DEALER peers send [identity, payload]; REQ peers add an empty delimiter frame.
    const envelope = frames.slice(0, -1)
    const payload = frames[frames.length - 1]
    handle(payload).then(reply => sendQueue.run(() => sock.send([...envelope, reply])))
      .catch(err => log('sidecar', `could not send a reply: ${err && err.message}`))
  }
}

if (require.main === module) {
  main().catch(err => {
    process.stderr.write(`sidecar failed to start: ${err && err.stack ? err.stack : err}\n`)
    process.exit(1)
  })
}

module.exports = { parseArgs, checkEndpoint }
