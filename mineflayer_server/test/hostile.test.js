'use strict'
// A hostile local user on the embedded server's port: malformed byte streams (negative and huge frame
// lengths, truncated packets, garbage after a handshake, random bytes) close their own connection and are
// logged, while an episode of the sidecar runs to its end and the process stays up. And a stranger on the
// sidecar's own socket (another connection holding the same keys) can neither use nor close an arena it did
// not open.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const net = require('net')
const { decode, encode } = require('@msgpack/msgpack')
const { startSidecar, dealer } = require('./helpers')
const { splitFrames, MAX_FRAME_BYTES } = require('../src/plugin/connections')

const STREAMS = 10000
const CONCURRENCY = 24
/** Bounds of the whole fuzz run and of one connection (one that the server leaves open is cut by us). */
const FUZZ_DEADLINE_MS = 300000
const STREAM_MS = 2000
const PROTOCOL_1_21_4 = 769

let sc

before(async () => {
  sc = await startSidecar(['--skill-timeout-ms', '20000'])
  const opened = await sc.call('open_arena', { arena: 'a0' })
  assert.equal(opened.ok, true, JSON.stringify(opened.error))
})
after(async () => { await sc.close() })

/** A seeded PRNG (mulberry32), so a failing stream can be found again by its index. */
function prng (seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function varint (value) {
  const out = []
  let v = value >>> 0 // negative values as their 32-bit two's complement: 5 bytes
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
const handshake = (next, port) => frame(Buffer.concat([varint(0), varint(PROTOCOL_1_21_4), string('127.0.0.1'), Buffer.from([port >> 8, port & 0xff]), varint(next)]))

/** Stream `i` of the run: crafted kinds in turn, every third one random bytes. */
function stream (i, rand, port) {
  const bytes = n => Buffer.from(Array.from({ length: n }, () => Math.floor(rand() * 256)))
  const kinds = [
    () => Buffer.from('9cffffff0f', 'hex'), // -100: the 5 bytes that ended the process
    () => varint(-1 - Math.floor(rand() * 2 ** 31)), // any negative length
    () => Buffer.concat([varint(MAX_FRAME_BYTES + 1 + Math.floor(rand() * 2 ** 30)), bytes(16)]), // huge
    () => Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), // a VarInt that never ends
    () => frame(Buffer.alloc(0)), // an empty frame
    () => handshake(2, port).subarray(0, 1 + Math.floor(rand() * 12)), // a truncated handshake
    () => Buffer.concat([handshake(2, port), frame(bytes(1 + Math.floor(rand() * 64)))]), // garbage after a login handshake
    () => Buffer.concat([handshake(1, port), frame(bytes(1 + Math.floor(rand() * 64)))]), // garbage after a status handshake
    () => Buffer.concat([handshake(2, port), frame(Buffer.concat([varint(0), varint(2 ** 31 - 1)]))]), // login_start: a huge name length
    () => Buffer.concat([handshake(2, port), frame(Buffer.concat([varint(0), varint(-5)]))]), // login_start: a negative name length
    () => Buffer.concat([handshake(1, port), frame(varint(0)), frame(Buffer.concat([varint(1), bytes(3)]))]), // status, then a short ping
    () => Buffer.concat([handshake(Math.floor(rand() * 2 ** 31), port), frame(bytes(8))]), // an unknown next state
    () => Buffer.concat([Buffer.from([0xfe, 0x01, 0xfa]), bytes(Math.floor(rand() * 32))]), // a broken legacy ping
    () => Buffer.concat([varint(200), bytes(1 + Math.floor(rand() * 150))]) // a truncated frame
  ]
  if (i % 3 === 2) return bytes(1 + Math.floor(rand() ** 3 * 4096)) // random bytes, mostly short
  return kinds[i % kinds.length]()
}

/** Send `payload` on a fresh connection; resolves once the server closed it or STREAM_MS passed. */
function send (port, payload) {
  return new Promise(resolve => {
    const socket = net.connect(port, '127.0.0.1')
    const timer = setTimeout(() => { socket.destroy(); resolve('cut') }, STREAM_MS)
    socket.on('error', () => {})
    socket.on('data', () => {})
    socket.on('close', () => { clearTimeout(timer); resolve('closed') })
    socket.on('connect', () => socket.end(payload))
  })
}

const SPEC = {
  agents: ['agent_a', 'agent_b'],
  stations: [{ name: 'chest_in', kind: 'chest', pos: [3, 0, 2], cells: [] }, { name: 'chest_out', kind: 'chest', pos: [-3, 0, 2], cells: [] }],
  positions: { agent_a: [0, 0, 0], agent_b: [3, 0, 0] },
  inventories: {},
  containers: { chest_in: { oak_planks: 4 } }
}

let calls = 0
async function ok (actor, op, args) {
  const reply = await sc.call('execute', { arena: 'a0', call: { id: `h${++calls}`, actor, op, args } })
  assert.equal(reply.ok, true, JSON.stringify(reply.error))
  assert.equal(reply.result.events[0].ok, true, `${op} failed: ${reply.result.events[0].reason}`)
}

/** One episode: withdraw, hand over, craft, deposit; its truth read back. */
async function episode () {
  const reset = await sc.call('reset', { arena: 'a0', spec: SPEC })
  assert.equal(reset.ok, true, JSON.stringify(reset.error))
  await ok('agent_a', 'withdraw', { station: 'chest_in', item: 'oak_planks', count: 4 })
  await Promise.all([
    ok('agent_a', 'give', { to: 'agent_b', item: 'oak_planks', count: 4 }),
    ok('agent_b', 'await_handoff', { from: 'agent_a', item: 'oak_planks', count: 4 })
  ])
  await ok('agent_b', 'craft', { item: 'crafting_table', count: 1, station: '' })
  await ok('agent_b', 'deposit', { station: 'chest_out', item: 'crafting_table', count: 1 })
  const truth = await sc.call('observe', { arena: 'a0' })
  assert.deepEqual(truth.result.containers, { chest_in: {}, chest_out: { crafting_table: 1 } })
}

test('frames are split by their length; a negative, huge or endless length is refused', () => {
  const { frames, rest } = splitFrames(Buffer.concat([frame(Buffer.from('ab')), frame(Buffer.alloc(0)), Buffer.from([5, 1])]))
  assert.deepEqual(frames.map(f => f.toString()), ['ab', ''])
  assert.deepEqual([...rest], [5, 1])
  assert.throws(() => splitFrames(Buffer.from('9cffffff0f', 'hex')), /longer than 3 VarInt bytes/)
  assert.throws(() => splitFrames(varint(MAX_FRAME_BYTES + 1)), /longer than 3 VarInt bytes/)
  assert.deepEqual(splitFrames(Buffer.from([0x80, 0x80])).frames, []) // a length still arriving
})

test('the 5 bytes 9c ff ff ff 0f close only their connection', async () => {
  assert.equal(await send(sc.ready.mc_port, Buffer.from('9cffffff0f', 'hex')), 'closed')
  assert.equal((await sc.call('ping')).result, 'pong')
  assert.equal(sc.child.exitCode, null)
  assert.match(sc.stderr.join(''), /\[connections\] closed 127\.0\.0\.1:\d+ \(not logged in\): frame length longer than 3 VarInt bytes/)
})

test(`${STREAMS} malformed streams while episodes run: every episode succeeds and the sidecar stays up`, async () => {
  const port = sc.ready.mc_port
  const rand = prng(26)
  const started = Date.now()
  let next = 0
  let sent = 0
  const outcomes = { closed: 0, cut: 0 }
  async function worker () {
    while (next < STREAMS && Date.now() - started < FUZZ_DEADLINE_MS) {
      const i = next++
      outcomes[await send(port, stream(i, rand, port))]++
      sent++
    }
  }
  const fuzz = Promise.all(Array.from({ length: CONCURRENCY }, worker))
  let episodes = 0
  let fuzzing = true
  fuzz.then(() => { fuzzing = false })
  while (fuzzing || episodes === 0) {
    await episode()
    episodes++
  }
  await fuzz
  process.stderr.write(`${sent} streams in ${Date.now() - started} ms (${JSON.stringify(outcomes)}), ${episodes} episodes\n`)
  assert.equal(sent, STREAMS, `only ${sent} streams were sent within ${FUZZ_DEADLINE_MS} ms`)
  assert.equal(sc.child.exitCode, null)
  assert.equal((await sc.call('ping')).result, 'pong')
  await episode() // and after the storm
})

test('an arena belongs to the connection that opened it: another may not reset, drive, observe or close it', async () => {
  const stranger = dealer(sc.ready, sc.keys, { receiveTimeout: 30000 })
  let id = 0
  const ask = async (op, args) => {
    await stranger.send(encode({ v: 2, id: ++id, op, args }))
    const [payload] = await stranger.receive()
    return decode(payload)
  }
  try {
    const refused = /arena a0 is held by another (connection|client)/
    for (const [op, args] of [
      ['observe', { arena: 'a0' }],
      ['barrier', { arena: 'a0' }],
      ['reset', { arena: 'a0', spec: SPEC }],
      ['execute', { arena: 'a0', call: { id: 'x', actor: 'agent_a', op: 'wait', args: { ticks: 1 } } }],
      ['close_arena', { arena: 'a0' }],
      ['open_arena', { arena: 'a0' }]
    ]) {
      const reply = await ask(op, args)
      assert.equal(reply.ok, false, `${op} of another connection's arena was allowed`)
      assert.equal(reply.error.type, 'ArenaBusy', `${op}: ${JSON.stringify(reply.error)}`)
      assert.match(reply.error.message, refused)
    }
    // an arena of its own it may open and use; the owner's arena is still its owner's
    const own = await ask('open_arena', {})
    assert.equal(own.ok, true, JSON.stringify(own.error))
    assert.notEqual(own.result.arena, 'a0')
    assert.equal((await ask('barrier', { arena: own.result.arena })).ok, true)
    assert.equal((await ask('close_arena', { arena: own.result.arena })).ok, true)
    assert.equal((await ask('observe', { arena: own.result.arena })).error.type, 'BadRequest') // closed: no longer its own
    await episode()
  } finally {
    stranger.close()
  }
})
