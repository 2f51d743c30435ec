'use strict'
// What another local user, or another client of the same sidecar, can do to it: nothing that stops it, shows
// them other clients' arenas, keeps arenas after they are gone or holds its memory. The sidecar belongs to the
// process that started it (the launch token, socket.js); the arenas of a connection that went away are released;
// the embedded server's port closes a connection whose frame before login is over PRELOGIN_FRAME_BYTES when its
// length arrives, and lets at most MAX_PENDING strangers wait for their login at once.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('fs')
const net = require('net')
const { decode, encode } = require('@msgpack/msgpack')
const { startSidecar, dealer, waitFor } = require('./helpers')
const { PRELOGIN_FRAME_BYTES, MAX_PENDING } = require('../src/plugin/connections')
const { SWEEP_MS, MISSES_TO_RELEASE } = require('../src/socket')

const PROTOCOL_1_21_4 = 769
let sc

before(async () => { sc = await startSidecar(['--arenas', '1']) })
after(async () => { await sc.close() })

/** Another connection to the sidecar holding the same keys (a client of another process): `ask(op, args)`. */
function stranger () {
  const sock = dealer(sc.ready, sc.keys, { receiveTimeout: 30000 })
  let id = 0
  return {
    sock,
    async ask (op, args = {}) {
      const mine = ++id
      await sock.send(encode({ v: 2, id: mine, op, args }))
      for (;;) { // a probe of whether this connection is still there (id 0) answers no request
        const reply = decode((await sock.receive())[0])
        if (reply.id === mine) return reply
      }
    },
    close () { sock.close() }
  }
}

const held = async () => Object.fromEntries((await sc.call('hello', { token: sc.token })).result.arenas.map(a => [a.name, a.held]))

test('only the process that started the sidecar may shut it down or list every arena', async () => {
  const other = stranger()
  try {
    assert.equal((await sc.call('open_arena', { arena: 'a0' })).ok, true)
    const own = await other.ask('open_arena', {})
    assert.equal(own.ok, true, JSON.stringify(own.error))
    for (const args of [{}, { token: 'f'.repeat(32) }, { token: sc.token.slice(0, -1) }]) {
      const refused = await other.ask('shutdown', args)
      assert.equal(refused.ok, false)
      assert.equal(refused.error.type, 'BadRequest')
      assert.match(refused.error.message, /shutdown is for the process that started this sidecar/)
      // a connection without the token sees its own arena only
      assert.deepEqual((await other.ask('hello', args)).result.arenas.map(a => a.name), [own.result.arena])
    }
    assert.equal((await sc.call('shutdown', {})).error.type, 'BadRequest') // the owner's connection needs it too
    assert.deepEqual(await held(), { a0: true, [own.result.arena]: true })
    assert.equal((await other.ask('ping')).result, 'pong')
    assert.equal((await other.ask('close_arena', { arena: own.result.arena })).ok, true)
  } finally {
    other.close()
  }
})

test('the arenas of a connection that went away are released, and those of one that stays are kept', async () => {
  const gone = stranger()
  const stays = stranger()
  try {
    const lost = (await gone.ask('open_arena', { arena: 'gone' })).result.arena
    const kept = (await stays.ask('open_arena', { arena: 'stays' })).result.arena
    assert.deepEqual([lost, kept], ['gone', 'stays'])
    gone.close() // as a process killed without closing its arenas
    const started = Date.now()
    const after = await waitFor(async () => { const h = await held(); return h.gone ? null : h }, 30000, 'the departed connection\'s arena released')
    assert.equal(after.stays, true, 'the arena of a connection that stays was released')
    assert.equal(after.a0, true)
    process.stderr.write(`a departed connection's arena released after ${Date.now() - started} ms ` +
      `(${MISSES_TO_RELEASE} probes ${SWEEP_MS} ms apart)\n`)
    assert.equal((await stays.ask('barrier', { arena: kept })).ok, true)
    // another connection may take it now
    const next = stranger()
    try {
      const taken = await next.ask('open_arena', { arena: 'gone' })
      assert.equal(taken.ok, true, JSON.stringify(taken.error))
      assert.equal((await next.ask('close_arena', { arena: 'gone' })).ok, true)
    } finally {
      next.close()
    }
    assert.equal((await stays.ask('close_arena', { arena: kept })).ok, true)
  } finally {
    stays.close()
  }
})

function varint (value) {
  const out = []
  let v = value >>> 0
  do {
    let byte = v & 0x7f
    v >>>= 7
    if (v) byte |= 0x80
    out.push(byte)
  } while (v)
  return Buffer.from(out)
}
const frame = body => Buffer.concat([varint(body.length), body])
const string = s => Buffer.concat([varint(Buffer.byteLength(s)), Buffer.from(s)])
const loginHandshake = port => frame(Buffer.concat([varint(0), varint(PROTOCOL_1_21_4), string('127.0.0.1'), Buffer.from([port >> 8, port & 0xff]), varint(2)]))

/** The sidecar's resident memory in MB (Linux). */
const rssMb = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${sc.child.pid}/status`, 'utf8'))[1]) / 1024

/** Open `n` connections to the server, each writing `payload` and staying open; `closed` counts those the server closed. */
function flood (n, payload) {
  const state = { sockets: [], closed: 0, order: [] }
  for (let i = 0; i < n; i++) {
    const socket = net.connect(sc.ready.mc_port, '127.0.0.1')
    socket.on('error', () => {})
    socket.on('data', () => {})
    socket.on('close', () => { state.closed++; state.order.push(i) })
    socket.on('connect', () => socket.write(payload))
    state.sockets.push(socket)
  }
  return state
}

test('300 half-open connections sending 2 MiB frames are closed as their lengths arrive; memory stays at its level', { skip: process.platform !== 'linux' && 'reads /proc' }, async () => {
  // a frame announcing 2 MiB - 1 bytes (vanilla's largest), of which 256 KiB are sent: a client that then sends nothing
  const payload = Buffer.concat([varint((1 << 21) - 1), Buffer.alloc(256 * 1024, 7)])
  const before = rssMb()
  let peak = before
  const sampler = setInterval(() => { peak = Math.max(peak, rssMb()) }, 50)
  const state = flood(300, payload)
  try {
    await waitFor(() => state.closed === 300, 60000, 'the server to close all 300 connections')
  } finally {
    clearInterval(sampler)
    for (const s of state.sockets) s.destroy()
  }
  const after = rssMb()
  process.stderr.write(`300 half-open 2 MiB frames: sidecar RSS ${before.toFixed(0)} MB before, peak ${peak.toFixed(0)} MB, ` +
    `${after.toFixed(0)} MB after\n`)
  assert.ok(peak - before < 100, `RSS grew ${(peak - before).toFixed(0)} MB (from ${before.toFixed(0)})`)
  assert.ok(after - before < 50, `RSS stayed ${(after - before).toFixed(0)} MB above its level`)
  assert.ok(PRELOGIN_FRAME_BYTES < payload.length)
  assert.equal((await sc.call('ping')).result, 'pong')
})

test(`at most ${MAX_PENDING} strangers wait for their login at once, the oldest closed first; bots still join`, async () => {
  const n = MAX_PENDING + 40
  const state = flood(n, loginHandshake(sc.ready.mc_port))
  try {
    await waitFor(() => state.closed === n - MAX_PENDING, 30000, `the server to close all but ${MAX_PENDING} waiting connections`)
    // a connection is closed when a newer one arrives beyond the bound: those closed are the oldest ones
    assert.deepEqual([...state.order].sort((a, b) => a - b), [...Array(n - MAX_PENDING).keys()])
    // a stranger never keeps our own bots out: a reset that joins a new bot works while they wait
    const reset = await sc.call('reset', {
      arena: 'a0',
      spec: { agents: ['agent_a', 'agent_c'], stations: [], positions: { agent_a: [0, 0, 0], agent_c: [2, 0, 0] }, inventories: {}, containers: {} }
    })
    assert.equal(reset.ok, true, JSON.stringify(reset.error))
    assert.deepEqual(reset.result.rejoined, ['agent_c'])
    assert.ok(n - state.closed <= MAX_PENDING) // a bot's connection may close one more stranger, never itself
  } finally {
    for (const s of state.sockets) s.destroy()
  }
})
