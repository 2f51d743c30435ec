#!/usr/bin/env node
'use strict'
// Entry point: start the embedded server (or find the external one) and the bots, bind one ZeroMQ ROUTER socket on loopback
// or ipc, print `READY <json>` on stdout, then answer requests until `shutdown`. A server that fails the first arenas'
// bots (protocol.js SERVER_FAULTS) is printed as `FAULT {"type", "message"}` before the process exits with 1.
//
//   node src/sidecar.js --endpoint tcp://127.0.0.1:5555 --rules DIR [--agents agent_a,agent_b] [--server embedded|external]
//                       [--mc-host H] [--mc-port 0] [--arenas 1] [--max-arenas 16] [--arena-x0 0]
//                       [--cook-ticks 200] [--skill-timeout-ms 20000] [--spawn-timeout-ms 40000] [--parent-pid PID] [--client-key HEX] [--test-ops]
//
// The server holds `--arenas` arenas from the start (each with the `--agents` bots connected), and up to
// `--max-arenas` once clients open more (arenaPool.js). Who may use the socket and how large a message may
// be, who may shut it down or list every arena (the process holding the launch token), and how the arenas of a
// departed connection are released: socket.js. With `--parent-pid` the sidecar exits by itself once that process is
// gone, removing its ipc socket's folder.

// stdout belongs to the READY line alone: flying-squid's console prompt and any library chatter go to stderr.
const writeStdout = process.stdout.write.bind(process.stdout)
process.stdout.write = (chunk, encoding, cb) => process.stderr.write(chunk, encoding, cb)

const { createLogger } = require('./log')
const { startServer, stopServer, MINECRAFT_VERSION } = require('./server')
const { ArenaPool, ARENA_SPACING } = require('./arenaPool')
const { ARENA_HALF_WIDTH } = require('./world')
const { EmbeddedArena } = require('./arenas/embedded')
const { ExternalArena } = require('./arenas/external')
const { createOps, SIDECAR_VERSION } = require('./ops')
const { parseArgs } = require('./cli')
const { loadRules } = require('./rules')
const { MAX_AGENTS } = require('./spec')
const { PROTOCOL_VERSION, SERVER_FAULTS, ProtocolError, decodeRequest, encodeResult, encodeError, wireLimits } = require('./protocol')
const { bindSocket, ownerToken, watchDepartures, removeIpcFolder, PROBE_ID } = require('./socket')
const { SerialQueue } = require('./util')
const { StallMonitor } = require('./stall')

/** How often the parent is looked for, and how long a shutdown may take before the process just exits. */
const PARENT_POLL_MS = 250
const SHUTDOWN_DEADLINE_MS = 3000

/**
 * Call `onGone` once process `pid` is gone. Our parent's death shows at once as a new parent pid (we are
 * handed to init or a subreaper), even while it is an unreaped zombie, which `kill(pid, 0)` still finds;
 * for a `pid` that is not our parent, `kill(pid, 0)` failing is the sign.
 */
function watchParent (pid, log, onGone) {
  const isParent = process.ppid === pid
  const gone = () => {
    if (isParent) return process.ppid !== pid
    // EPERM: the pid now names another user's process, so ours is gone
    try { process.kill(pid, 0); return false } catch (err) { return err.code === 'ESRCH' || err.code === 'EPERM' }
  }
  const timer = setInterval(() => {
    if (!gone()) return
    clearInterval(timer)
    log('sidecar', `parent process ${pid} is gone; exiting`)
    onGone()
  }, PARENT_POLL_MS)
  timer.unref()
}

async function main () {
  const started = Date.now()
  const opts = parseArgs(process.argv.slice(2))
  const log = createLogger()
  const token = ownerToken()
  // until there is something to shut down, stopping is just exiting
  let shutdown = async (code = 0) => { removeIpcFolder(opts.endpoint); process.exit(code) }
  if (opts.parentPid) {
    watchParent(opts.parentPid, log, () => {
      removeIpcFolder(opts.endpoint) // first: nobody is left to connect, and a hung shutdown must not keep it
      shutdown(0)
    })
  }
  const rules = loadRules(opts.rulesDir)
  const limits = wireLimits(rules.limits)
  log('sidecar', `rule tables from ${rules.dir}`)
  let serv = null
  let makeArena
  let server
  if (opts.server === 'external') {
    makeArena = () => new ExternalArena({ host: opts.mcHost, port: opts.mcPort, log })
    server = { host: opts.mcHost, port: opts.mcPort, floorY: null }
    log('sidecar', `external Minecraft server at ${opts.mcHost}:${opts.mcPort}; the bots must be operators there`)
  } else {
    const arenas = { x0: opts.arenaX0, spacing: ARENA_SPACING, halfWidth: ARENA_HALF_WIDTH }
    const embedded = await startServer({ port: opts.mcPort, cookTicks: opts.cookTicks, rules, log, maxPlayers: MAX_AGENTS * opts.maxArenas + 8, arenas })
    serv = embedded.serv
    makeArena = () => new EmbeddedArena(embedded)
    server = { host: '127.0.0.1', port: embedded.port, floorY: embedded.floorY }
    log('sidecar', `flying-squid ${MINECRAFT_VERSION} on 127.0.0.1:${embedded.port}, floor y=${embedded.floorY}`)
  }
  const pool = new ArenaPool({ makeArena, rules, log, skillTimeoutMs: opts.skillTimeoutMs, spawnTimeoutMs: opts.spawnTimeoutMs, maxArenas: opts.maxArenas, x0: opts.arenaX0 })
  const first = Array.from({ length: opts.arenas }, () => pool.create(null))
  await Promise.all(first.map(entry => entry.world.ensureBots(opts.agents)))
  if (server.floorY === null && first.length) server.floorY = first[0].world.floorY

  const socket = await bindSocket({ endpoint: opts.endpoint, maxBytes: limits.transport.message_bytes, clientKey: opts.clientKey, log })
  const { sock, endpoint } = socket
  const sendQueue = new SerialQueue() // a zeromq.js socket allows one pending send at a time

  let stopping = false
  shutdown = async (code = 0) => {
    if (stopping) return
    stopping = true
    log('sidecar', 'shutting down')
    setTimeout(() => process.exit(code), SHUTDOWN_DEADLINE_MS).unref() // a hung bot or server never keeps us alive
    await sendQueue.run(() => {})
    await pool.closeAll()
    if (serv) await Promise.race([stopServer(serv), new Promise(resolve => setTimeout(resolve, 1000))])
    departures.stop()
    socket.close()
    removeIpcFolder(endpoint)
    process.exit(code)
  }
  const stalls = new StallMonitor({ log }).start()
  const ops = createOps(pool, () => shutdown(0), { testOps: opts.testOps, stalls, token })
  const send = frames => sendQueue.run(() => sock.send(frames))
  const departures = watchDepartures({ sock, send, pool, log, probe: encodeResult(PROBE_ID, null) })
  process.on('SIGTERM', () => shutdown(0))
  process.on('SIGINT', () => shutdown(0))

  /** `owner`: the routing id of the connection the request came on (hex); arenas belong to it. */
  async function handle (payload, owner) {
    let id = null
    try {
      const request = decodeRequest(payload, limits.transport.message_bytes)
      id = request.id
      const op = Object.hasOwn(ops, request.op) ? ops[request.op] : null
      if (!op) throw new ProtocolError('BadRequest', `unknown op ${JSON.stringify(request.op)}; ops are ${Object.keys(ops).join(', ')}`)
      return encodeResult(id, await op(request.args, { owner }))
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
    arenas: pool.list().map(a => a.name),
    agents: opts.agents,
    server: opts.server,
    mc_host: server.host,
    mc_port: server.port,
    floor_y: server.floorY,
    pid: process.pid,
    startup_ms: Date.now() - started,
    ...(socket.serverKey ? { curve_server_key: socket.serverKey } : {})
  }) + '\n')

  let unsent = 0
  /** A reply that could not be sent (its connection is gone, or reads nothing): counted, logged once per 100. */
  const noteUnsent = err => { if (unsent++ % 100 === 0) log('sidecar', `could not send a reply (${unsent} so far): ${err && err.message}`) }

  for await (const frames of sock) {
    // DEALER peers send [identity, payload]; REQ peers add an empty delimiter frame.
    const envelope = frames.slice(0, -1)
    const payload = frames[frames.length - 1]
    handle(payload, Buffer.from(frames[0]).toString('hex')).then(reply => send([...envelope, reply]))
      .catch(err => noteUnsent(err))
  }
}

if (require.main === module) {
  main().catch(err => {
    // a server that failed the first arenas' bots: the client raises its typed fault, not "the sidecar died"
    if (err instanceof ProtocolError && SERVER_FAULTS.includes(err.type)) writeStdout('FAULT ' + JSON.stringify({ type: err.type, message: err.message }) + '\n')
    process.stderr.write(`sidecar failed to start: ${err && err.stack ? err.stack : err}\n`)
    process.exit(1)
  })
}
