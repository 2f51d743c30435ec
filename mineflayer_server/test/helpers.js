'use strict'
// Shared fixtures: an embedded server with two real mineflayer bots, and a sidecar process with a
// ZeroMQ DEALER client speaking the wire protocol.

const path = require('path')
const { spawn } = require('child_process')
const readline = require('readline')
const zmq = require('zeromq')
const { encode, decode } = require('@msgpack/msgpack')
const { startServer, stopServer } = require('../src/server')
const { connectBot } = require('../src/bots')
const { World } = require('../src/world')
const { loadRules } = require('../src/rules')
const { waitFor } = require('../src/util')

/**
 * How long a test waits for the server and its clients to settle (an item synced, a block seen, a bot
 * gone). Only a failure waits it out, so it is sized for a machine busy with other tests, not for speed.
 */
const SETTLE_MS = 10000

/**
 * The rule tables the tests run with: $GENCOORD_RULES, else the gencoord_env/data directory of the
 * checkout these tests live in (an installed sidecar is given its directory by the Python side).
 */
const RULES_DIR = process.env.GENCOORD_RULES || path.resolve(__dirname, '..', '..', 'gencoord_env', 'data')
const RULES = loadRules(RULES_DIR)

const countOf = (bot, name) => bot.inventory.items().filter(i => i.name === name).reduce((n, i) => n + i.count, 0)

/**
 * Server + bots agent_a / agent_b + World. `lines` collects every logged line. `operators`: players the
 * server admits from any client and obeys, for a server standing in for an external one (none by default).
 */
async function startArena ({ cookTicks = 2, operators = [] } = {}) {
  const lines = []
  const log = (scope, message) => { lines.push(`[${scope}] ${message}`); if (process.env.ARENA_LOG) process.stderr.write(`[${scope}] ${message}\n`) }
  const { serv, port, floorY, api } = await startServer({ cookTicks, rules: RULES, log, operators })
  const world = new World({ serv, api, port, floorY, rules: RULES, log, skillTimeoutMs: 8000 })
  await world.ensureBots(['agent_a', 'agent_b'])
  const disconnects = []
  for (const bot of world.bots.values()) bot.on('end', reason => disconnects.push(`${bot.username}: ${reason}`))
  return {
    serv, port, floorY, api, world, lines, disconnects, log,
    a: world.bot('agent_a'),
    b: world.bot('agent_b'),
    player: name => api.playerByName(name),
    async close () {
      await world.close()
      await stopServer(serv)
      process.stdin.destroy() // flying-squid's console reads stdin and would keep the test process alive
    }
  }
}

const Z85 = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#'

/** Z85 text -> bytes (ZeroMQ RFC 32), e.g. a CURVE key as zeromq.js makes it -> the 32 bytes --client-key takes in hex. */
function z85Decode (text) {
  const out = Buffer.alloc(text.length / 5 * 4)
  for (let i = 0; i < text.length; i += 5) {
    let value = 0
    for (let j = 0; j < 5; j++) value = value * 85 + Z85.indexOf(text[i + j])
    out.writeUInt32BE(value, i / 5 * 4)
  }
  return out
}

/** A DEALER speaking CURVE with `keys` (`{publicKey, secretKey}`, or null for none) to the sidecar at `ready`. */
function dealer (ready, keys, options = {}) {
  const curve = keys ? { curveServerKey: ready.curve_server_key, curvePublicKey: keys.publicKey, curveSecretKey: keys.secretKey } : {}
  const sock = new zmq.Dealer({ linger: 0, ...curve, ...options })
  sock.connect(ready.endpoint)
  return sock
}

/**
 * Start `src/sidecar.js` on tcp with a fresh client key pair (the sidecar admits only it) and connect a DEALER
 * with it; `call(op, args)` returns the decoded reply. `keys` is that pair, for tests that open more sockets;
 * `token` the launch token, which `shutdown` and the full arena list of `hello` need.
 */
async function startSidecar (extraArgs = []) {
  const started = Date.now()
  const keys = zmq.curveKeyPair()
  const argv = [path.join(__dirname, '..', 'src', 'sidecar.js'), '--endpoint', 'tcp://127.0.0.1:0', '--rules', RULES_DIR,
    '--client-key', z85Decode(keys.publicKey).toString('hex'), ...extraArgs]
  // the launch token (socket.js): this test process is the one that started the sidecar
  const token = require('crypto').randomBytes(16).toString('hex')
  const child = spawn(process.execPath, argv, {
    stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GENCOORD_SIDECAR_TOKEN: token }
  })
  const stderr = []
  child.stderr.on('data', d => stderr.push(d.toString()))
  const ready = await new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout })
    rl.on('line', line => { if (line.startsWith('READY ')) resolve(JSON.parse(line.slice(6))) })
    child.on('exit', code => reject(new Error(`sidecar exited with ${code}: ${stderr.join('')}`)))
  })
  const startupMs = Date.now() - started
  const sock = dealer(ready, keys, { receiveTimeout: 60000 })
  let nextId = 0
  const pending = new Map()
  ;(async () => {
    try {
      for await (const [payload] of sock) {
        const reply = decode(payload)
        pending.get(reply.id)?.(reply)
        pending.delete(reply.id)
      }
    } catch (err) { /* socket closed */ }
  })()
  const sendQueue = []
  let sending = Promise.resolve()
  const sendRaw = (bytes, id) => new Promise(resolve => {
    pending.set(id, resolve)
    sending = sending.then(() => sock.send(bytes))
    sendQueue.push(sending)
  })
  const call = (op, args = {}, v = 2) => {
    const id = ++nextId
    return sendRaw(encode({ v, id, op, args }), id)
  }
  return {
    child, ready, startupMs, stderr, call, sendRaw, keys, token,
    nextId: () => ++nextId,
    async close () {
      if (child.exitCode === null) {
        await Promise.race([call('shutdown', { token }), new Promise(resolve => setTimeout(resolve, 3000))])
        await new Promise(resolve => { if (child.exitCode !== null) resolve(); else child.on('exit', resolve) })
      }
      sock.close()
    }
  }
}

module.exports = { startArena, startSidecar, dealer, z85Decode, countOf, waitFor, SETTLE_MS, RULES, RULES_DIR }
