'use strict'
// A malformed byte stream closes its own connection and is logged; the server, its players and the
// sidecar go on. minecraft-protocol 1.68's framing Splitter throws from inside the socket's 'data'
// handler on a frame length it cannot use (5 bytes, `9c ff ff ff 0f`, a negative VarInt, sent to the port
// before any login used to end the whole process), and waits forever for the rest of a frame of any
// positive length. Here:
// - frames are split by `splitFrames`, which refuses a length over 3 VarInt bytes or over
//   MAX_FRAME_BYTES (vanilla's bound, 2^21 - 1) and a negative one;
// - whatever the splitting, or a packet listener it calls synchronously, throws becomes an 'error' of that
//   client (minecraft-protocol's server ends a client on its first error) instead of escaping the socket;
// - a client whose packet listener throws, or whose framing failed, has its socket destroyed.
// - what a connection may hold before it plays is bounded, since anyone on this machine may connect: a frame
//   over PRELOGIN_FRAME_BYTES before the play state (handshake, login and configuration packets are a few
//   hundred bytes; vanilla's 2 MiB frames each held ~2.5 MB, 300 half-open ones 845 MB) closes the connection
//   when its length arrives, before its bytes are gathered; at most MAX_PENDING connections other than our own
//   bots' wait for their login at once (a new one closes the oldest), and none waits over LOGIN_DEADLINE_MS.
// Logged lines are bounded (LOG_BURST per LOG_WINDOW_MS, then a count), so a flood cannot fill the log.
// Each client's socket sends the packets of one turn of the event loop together (batchWrites.js).

const { createSplitter } = require('minecraft-protocol/src/transforms/framing')
const { batchWrites } = require('../batchWrites')
const { botOn } = require('../botSockets')

/** Vanilla's limit on a frame: its length is a VarInt of at most 3 bytes. */
const MAX_FRAME_BYTES = (1 << 21) - 1
const MAX_LENGTH_BYTES = 3
const LEGACY_PING = 0xfe
/** The largest frame a connection may send before it plays. */
const PRELOGIN_FRAME_BYTES = 1 << 16
/** Connections other than our bots' that may wait for their login at once; a new one beyond closes the oldest. */
const MAX_PENDING = 32
/** How long a connection other than our bots' may take to reach the play state. */
const LOGIN_DEADLINE_MS = 30000
const LOG_BURST = 20
const LOG_WINDOW_MS = 10000

class FramingError extends Error {
  constructor (message) {
    super(message)
    this.name = 'FramingError'
  }
}

/**
 * The frame length at `offset`: `{value, size}`, or null while its bytes have not all arrived. Throws a
 * FramingError for a length that is negative, over MAX_FRAME_BYTES or longer than 3 bytes.
 */
function readFrameLength (buf, offset, maxBytes = MAX_FRAME_BYTES) {
  let value = 0
  for (let i = 0; i < MAX_LENGTH_BYTES; i++) {
    if (offset + i >= buf.length) return null
    const byte = buf[offset + i]
    value |= (byte & 0x7f) << (7 * i)
    if ((byte & 0x80) === 0) {
      if (value > maxBytes) throw new FramingError(`frame length ${value} exceeds ${maxBytes} bytes`)
      return { value, size: i + 1 }
    }
  }
  throw new FramingError(`frame length longer than ${MAX_LENGTH_BYTES} VarInt bytes (negative or over ${MAX_FRAME_BYTES})`)
}

/**
 * Split `buf` into whole frames: `{frames, rest}`, `rest` the bytes of an incomplete frame. Throws a
 * FramingError for an unusable length, or one over `maxBytes`.
 */
function splitFrames (buf, maxBytes = MAX_FRAME_BYTES) {
  const frames = []
  let offset = 0
  for (;;) {
    const length = readFrameLength(buf, offset, maxBytes)
    if (length === null || buf.length < offset + length.size + length.value) break
    frames.push(buf.subarray(offset + length.size, offset + length.size + length.value))
    offset += length.size + length.value
  }
  return { frames, rest: buf.subarray(offset) }
}

/** The Splitter's transform: the stock one's behaviour (legacy ping included) with lengths checked and no throw escaping. */
function guardedTransform (chunk, enc, cb) {
  try {
    this.buffer = Buffer.concat([this.buffer, chunk])
    if (this.recognizeLegacyPing && this.buffer[0] === LEGACY_PING) {
      // the legacy server-list ping has no length prefix: pass it on as the stock Splitter does
      let payload = this.buffer.subarray(1)
      if (payload.length === 0) payload = Buffer.from('\0')
      this.push(Buffer.concat([Buffer.from([LEGACY_PING, 0x01]), payload]))
      return cb()
    }
    const { frames, rest } = splitFrames(this.buffer, this.maxFrameBytes || MAX_FRAME_BYTES)
    this.buffer = rest
    for (const frame of frames) this.push(frame)
  } catch (err) {
    this.buffer = Buffer.alloc(0)
    return cb(err)
  }
  return cb()
}

/** Replace the Splitter's transform once per process (every client and bot of this process shares the class). */
function guardSplitter () {
  const proto = Object.getPrototypeOf(createSplitter())
  if (proto._transform !== guardedTransform) proto._transform = guardedTransform
}

/** `log(scope, message)` letting through LOG_BURST lines per LOG_WINDOW_MS, then one count of those held back. */
function boundedLog (log) {
  let windowStart = 0
  let shown = 0
  let held = 0
  return message => {
    const now = Date.now()
    if (now - windowStart >= LOG_WINDOW_MS) {
      if (held) log('connections', `${held} more connections closed for malformed input in the last ${LOG_WINDOW_MS / 1000} s (not shown)`)
      windowStart = now
      shown = 0
      held = 0
    }
    if (shown < LOG_BURST) { shown++; log('connections', message) } else held++
  }
}

function server (serv, api) {
  guardSplitter()
  const note = boundedLog(api.log)
  const pending = new Map() // clients not yet playing, in the order they connected -> {close, timer}
  const settle = client => { clearTimeout(pending.get(client)?.timer); pending.delete(client) }
  serv._server.on('connection', client => {
    const socket = batchWrites(client.socket)
    const peer = `${socket.remoteAddress}:${socket.remotePort}`
    const close = why => {
      note(`closed ${peer} (${client.username || 'not logged in'}): ${why}`)
      settle(client)
      socket.destroy()
    }
    client.splitter.maxFrameBytes = PRELOGIN_FRAME_BYTES
    client.on('state', state => {
      if (state !== 'play') return
      settle(client)
      client.splitter.maxFrameBytes = MAX_FRAME_BYTES
    })
    socket.once('close', () => settle(client))
    // our bots are known by their socket (botSockets.js) once their connect listeners ran: older waiting
    // connections are looked up now; the newest may be a bot not yet registered, so it is never the one closed
    const strangers = [...pending].filter(([c]) => botOn(c.socket) === null)
    if (strangers.length >= MAX_PENDING) strangers[0][1].close(`${MAX_PENDING} other connections were waiting to log in`)
    const timer = setTimeout(() => {
      if (botOn(socket) === null) close(`not logged in within ${LOGIN_DEADLINE_MS / 1000} s`)
    }, LOGIN_DEADLINE_MS)
    timer.unref()
    pending.set(client, { close, timer })
    client.on('error', err => { if (err instanceof FramingError || err.code === 'ERR_OUT_OF_RANGE') close(err.message) })
    // A listener that throws while handling this client's packet ends this client only.
    const emit = client.emit
    client.emit = function (event, ...args) {
      try {
        return emit.call(this, event, ...args)
      } catch (err) {
        if (event === 'error') throw err
        close(`its ${event} packet made a handler throw: ${err && err.message}`)
        return false
      }
    }
  })
}

module.exports = {
  server, splitFrames, readFrameLength, FramingError, MAX_FRAME_BYTES, PRELOGIN_FRAME_BYTES, MAX_PENDING, LOGIN_DEADLINE_MS
}
