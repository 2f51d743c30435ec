'use strict'
// The sidecar's one ROUTER socket and who may talk to it.
//
// - Size: the message cap (limits.json, transport.message_bytes) is set on the socket itself
//   (ZMQ_MAXMSGSIZE): libzmq drops a larger message while receiving it, before it is allocated whole, and
//   closes that peer's connection. Nothing over the cap ever reaches JavaScript.
// - tcp (loopback only): CURVE. This process makes its key pair at start and reports the public key in
//   READY; a ZAP handler admits only the one client public key given on the command line (`--client-key`,
//   the Python side's per-launch key pair). A peer without that key never completes the handshake, so it
//   can send nothing, and the client knows it talks to this process (only it holds the secret key).
// - ipc: the socket file must lie in a folder only this user may enter (the Python side makes a 0700
//   folder per launch); a folder others can enter is refused.
// - Arenas belong to the connection that opened them, known by its ZeroMQ routing id (arenaPool.js); the arenas
//   of a connection that went away without closing them are released (`watchDepartures`).
// - The sidecar belongs to the process that started it: only a request carrying the launch token (given in the
//   environment, GENCOORD_SIDECAR_TOKEN, never on the command line, which every local user can read) may shut it
//   down or list every arena (`ownerToken`, `isOwner`). Other connections see their own arenas only.
// - A sidecar that exits removes its ipc socket's folder when it is one of ours (`removeIpcFolder`), so a parent
//   killed with SIGKILL leaves nothing behind.

const crypto = require('crypto')
const fs = require('fs')
const path = require('path')
const zmq = require('zeromq')

/** Where libzmq asks for authentication (RFC 27/ZAP); a ZAP handler binds it in the same context. */
const ZAP_ENDPOINT = 'inproc://zeromq.zap.01'
const ZAP_DOMAIN = 'gencoord'
/**
 * Bytes the socket allows above the cap: on tcp the cap applies to the encrypted CURVE frame, which is 33
 * bytes longer than the message. A message between the cap and this is still refused, as TooLarge, by
 * protocol.js, so the client learns why.
 */
const FRAME_SLACK = 64
/** The environment variable that carries the launch token; read once and removed from the environment. */
const TOKEN_ENV = 'GENCOORD_SIDECAR_TOKEN'
/** The folders the Python side makes for a sidecar's ipc socket (supervisor.py WORKDIR_PREFIX). */
const WORKDIR_PREFIX = 'gencoord-sidecar-'
/**
 * A reply with this id answers no request (ids start at 1): sent to a connection to learn whether it is still
 * there. Clients drop replies to ids they are not waiting for.
 */
const PROBE_ID = 0
/** After a connection drops, how often the holders of arenas are looked for, and how many misses release theirs. */
const SWEEP_MS = 1000
const MISSES_TO_RELEASE = 2
/** A sweep also runs this often while any arena is held, in case a drop went unnoticed. */
const IDLE_SWEEP_MS = 60000

/** The launch token from the environment (removed from it), or a random one nobody else knows. */
function ownerToken (env = process.env) {
  const token = env[TOKEN_ENV]
  delete env[TOKEN_ENV]
  return typeof token === 'string' && token.length >= 16 ? token : crypto.randomBytes(24).toString('hex')
}

/** Whether `given` (a request's `args.token`) is the launch token `token`, compared in constant time. */
function isOwner (token, given) {
  if (typeof given !== 'string') return false
  const a = Buffer.from(given)
  const b = Buffer.from(token)
  return a.length === b.length && crypto.timingSafeEqual(a, b)
}

/**
 * Release the arenas of connections that went away (their process died without closing them): after the socket
 * reports a dropped connection, each connection holding arenas is sent a probe (a reply of id PROBE_ID) every
 * SWEEP_MS; the socket is `mandatory`, so a probe to a routing id with no connection fails with EHOSTUNREACH, and
 * one that misses MISSES_TO_RELEASE probes in a row has its arenas released (a client reconnecting under its
 * routing id, as a Lazy Pirate resend does, is back before that). `send(frames)` sends without waiting.
 * Returns `{sweep(), stop()}`.
 */
function watchDepartures ({ sock, send, pool, log, probe }) {
  const misses = new Map() // routing id (hex) -> probes missed in a row
  let timer = null
  let stopped = false
  const schedule = ms => {
    if (stopped || timer) return
    timer = setTimeout(() => { timer = null; sweep().catch(err => log('socket', `departure sweep failed: ${err && err.message}`)) }, ms)
    timer.unref()
  }
  async function sweep () {
    const holders = pool.holders()
    for (const owner of misses.keys()) if (!holders.has(owner)) misses.delete(owner)
    for (const owner of holders) {
      let gone = false
      try {
        await send([Buffer.from(owner, 'hex'), probe])
      } catch (err) {
        gone = err && err.code === 'EHOSTUNREACH'
      }
      const n = gone ? (misses.get(owner) || 0) + 1 : 0
      if (n >= MISSES_TO_RELEASE) {
        misses.delete(owner)
        pool.release(owner)
      } else if (n) {
        misses.set(owner, n)
      } else {
        misses.delete(owner)
      }
    }
    schedule(misses.size ? SWEEP_MS : IDLE_SWEEP_MS)
  }
  ;(async () => {
    for await (const event of sock.events) {
      if (event.type === 'disconnect') { clearTimeout(timer); timer = null; schedule(SWEEP_MS) }
    }
  })().catch(err => { if (!stopped) log('socket', `socket events stopped: ${err && err.message}`) })
  schedule(IDLE_SWEEP_MS)
  return { sweep, stop () { stopped = true; clearTimeout(timer) } }
}

/** Remove the socket file of an ipc `endpoint` and its folder, when the folder is one the Python side made and is
 * then empty; anything else is left alone. Never throws. */
function removeIpcFolder (endpoint) {
  if (typeof endpoint !== 'string' || !endpoint.startsWith('ipc://')) return
  const file = endpoint.slice('ipc://'.length)
  const dir = path.dirname(file)
  if (!path.basename(dir).startsWith(WORKDIR_PREFIX)) return
  try { fs.unlinkSync(file) } catch (err) { /* gone already */ }
  try { fs.rmdirSync(dir) } catch (err) { /* not empty, or gone */ }
}

/** A CURVE public key as 64 hex digits (how `--client-key` takes it) -> 32 bytes; throws saying what is expected. */
function parseClientKey (hex) {
  if (typeof hex !== 'string' || !/^[0-9a-f]{64}$/i.test(hex)) {
    throw new Error('--client-key must be a CURVE public key as 64 hex digits (the Python side makes one per launch)')
  }
  return Buffer.from(hex, 'hex')
}

/** Refuse an ipc endpoint whose folder others may enter: the folder is all that guards an ipc socket. */
function checkIpcFolder (endpoint) {
  const dir = path.dirname(endpoint.slice('ipc://'.length))
  let st
  try {
    st = fs.statSync(dir)
  } catch (err) {
    throw new Error(`ipc endpoint ${endpoint}: its folder ${dir} cannot be read (${err.code || err.message})`)
  }
  if (process.platform !== 'win32' && (st.mode & 0o077) !== 0) {
    throw new Error(`ipc endpoint ${endpoint}: its folder ${dir} has mode ${(st.mode & 0o777).toString(8)}; ` +
      'other users could connect: use a folder only you may enter (mode 0700)')
  }
}

/** Answer ZAP requests: CURVE with exactly `allowed` (32 bytes) passes, anything else is refused and logged. */
async function startZap (allowed, log) {
  const zap = new zmq.Reply()
  await zap.bind(ZAP_ENDPOINT)
  ;(async () => {
    for await (const frames of zap) {
      // version, request id, domain, address, identity, mechanism, credentials...
      const [version, requestId, , address, , mechanism, key] = frames
      const ok = String(mechanism) === 'CURVE' && key !== undefined && key.length === allowed.length &&
        crypto.timingSafeEqual(key, allowed)
      if (!ok) log('socket', `refused a ${String(mechanism)} connection from ${String(address)}: not the client key this sidecar was started for`)
      await zap.send([version, requestId, ok ? '200' : '400', ok ? 'OK' : 'unknown client key', '', ''])
    }
  })().catch(err => { if (!zap.closed) log('socket', `ZAP handler stopped: ${err && err.message}`) })
  return zap
}

/**
 * Bind the ROUTER. Resolves to `{sock, endpoint, serverKey, close()}`; `serverKey` is the CURVE public key
 * (z85) on tcp, else null.
 */
async function bindSocket ({ endpoint, maxBytes, clientKey, log }) {
  // handover: a client that reconnects under its routing id (the Python client's Lazy Pirate resend) takes
  // over the old connection's place, and so keeps the arenas it opened (arenaPool.js binds them to that id)
  // mandatory: a send to a routing id with no connection fails (EHOSTUNREACH) instead of vanishing, which is how
  // departures are found; sendTimeout 0: a send to a peer whose queue is full fails at once (a client that reads
  // nothing never blocks the replies to the others)
  const options = { maxMessageSize: maxBytes + FRAME_SLACK, handover: true, mandatory: true, sendTimeout: 0 }
  let zap = null
  let serverKey = null
  if (endpoint.startsWith('tcp://')) {
    if (!clientKey) throw new Error('a tcp endpoint needs --client-key: the sidecar admits only the client holding that key')
    const allowed = parseClientKey(clientKey)
    const keys = zmq.curveKeyPair()
    zap = await startZap(allowed, log)
    Object.assign(options, {
      curveServer: true, curveSecretKey: keys.secretKey, curvePublicKey: keys.publicKey, zapDomain: ZAP_DOMAIN, zapEnforceDomain: true
    })
    serverKey = keys.publicKey
  } else {
    checkIpcFolder(endpoint)
  }
  const sock = new zmq.Router(options)
  try {
    await sock.bind(endpoint)
  } catch (err) {
    sock.close()
    if (zap) zap.close()
    throw err
  }
  return {
    sock,
    endpoint: sock.lastEndpoint,
    serverKey,
    close () { sock.close(); if (zap) zap.close() }
  }
}

module.exports = {
  bindSocket, parseClientKey, checkIpcFolder, ownerToken, isOwner, watchDepartures, removeIpcFolder,
  FRAME_SLACK, ZAP_ENDPOINT, TOKEN_ENV, PROBE_ID, SWEEP_MS, MISSES_TO_RELEASE
}
