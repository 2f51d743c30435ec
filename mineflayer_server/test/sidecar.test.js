'use strict'
// The sidecar process over real ZeroMQ + msgpack: handshake, errors, resets and every skill op.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { encode, decode } = require('@msgpack/msgpack')
const { startSidecar, dealer, RULES } = require('./helpers')

let sc

const SPEC = {
  agents: ['agent_a', 'agent_b'],
  stations: [
    { name: 'chest_in', kind: 'chest', pos: [3, 0, 2], cells: [] },
    { name: 'chest_out', kind: 'chest', pos: [-3, 0, 2], cells: [] },
    { name: 'table', kind: 'crafting_table', pos: [0, 0, 4], cells: [] },
    { name: 'furnace', kind: 'furnace', pos: [2, 0, -3], cells: [] },
    { name: 'site', kind: 'site', pos: [-3, 0, -3], cells: [[-3, 0, -3], [-2, 0, -3], [-3, 1, -3]] }
  ],
  positions: { agent_a: [0, 0, 0], agent_b: [3, 0, 0] },
  inventories: { agent_a: { raw_iron: 2, coal: 1 }, agent_b: { cobblestone: 3, oak_planks: 8 } },
  containers: { chest_in: { oak_planks: 4 } },
  cook_ticks: 2
}

// the arena every test here uses: the first of the sidecar's --arenas (sidecar-arenas.test.js runs several)
const A = 'a0'
/** Args of an arena op: reset takes {arena, spec}; observe, barrier and drop_bot {arena, ...}; hello the launch token. */
const onArena = (op, args = {}) => (op === 'reset' ? { arena: A, spec: args } : (['observe', 'barrier', 'drop_bot'].includes(op) ? { arena: A, ...args } : (op === 'hello' ? { token: sc.token, ...args } : args)))

/** A ping request of exactly `bytes` bytes (its args padded); `padded.id` is its id. */
function padded (bytes) {
  padded.id = sc.nextId()
  const bare = encode({ v: 2, id: padded.id, op: 'ping', args: { pad: '' } }).length
  // a msgpack str of n >= 65536 bytes has a 5-byte header instead of the empty string's 1
  const payload = encode({ v: 2, id: padded.id, op: 'ping', args: { pad: 'x'.repeat(bytes - bare - 4) } })
  assert.equal(payload.length, bytes)
  return payload
}

let callCounter = 0
async function execute (actor, op, args) {
  const reply = await sc.call('execute', { arena: A, call: { id: `c${++callCounter}`, actor, op, args } })
  assert.equal(reply.ok, true, JSON.stringify(reply.error))
  return reply.result.events
}
async function ok (actor, op, args) {
  const events = await execute(actor, op, args)
  assert.equal(events[0].ok, true, `${op} failed: ${events[0].reason}`)
  return events
}
const result = async (op, args) => {
  const reply = await sc.call(op, onArena(op, args))
  assert.equal(reply.ok, true, JSON.stringify(reply.error))
  return reply.result
}

const SKILL_TIMEOUT_MS = 8000 // two tests wait one out; each skill of the scripted episodes must fit it on a busy machine
before(async () => { sc = await startSidecar(['--cook-ticks', '2', '--skill-timeout-ms', String(SKILL_TIMEOUT_MS), '--test-ops']) })
after(async () => { await sc.close() })

test('READY names the endpoint and hello reports protocol, versions and arenas', async () => {
  assert.match(sc.ready.endpoint, /^tcp:\/\/127\.0\.0\.1:\d+$/)
  assert.equal(sc.ready.protocol, 2)
  assert.deepEqual(sc.ready.arenas, [A])
  assert.deepEqual(sc.ready.agents, ['agent_a', 'agent_b'])
  const hello = await result('hello')
  assert.deepEqual(hello, {
    protocol: 2,
    minecraft: '1.21.4',
    sidecar: require('../package.json').version,
    arenas: [{ name: A, slot: 0, origin: [0, 0, 0], held: false, agents: ['agent_a', 'agent_b'] }],
    max_arenas: 16
  })
  assert.deepEqual(await result('open_arena', {}), { arena: A, origin: [0, 0, 0], agents: ['agent_a', 'agent_b'] })
  assert.equal(await result('ping'), 'pong')
  process.stderr.write(`sidecar startup ${sc.startupMs} ms (READY startup_ms ${sc.ready.startup_ms})\n`)
})

test('protocol errors are typed: unknown op, bad version, oversized, bad args', async () => {
  const unknown = await sc.call('teleport', {})
  assert.equal(unknown.ok, false)
  assert.equal(unknown.error.type, 'BadRequest')
  assert.match(unknown.error.message, /unknown op "teleport"/)

  const version = await sc.call('ping', {}, 1)
  assert.deepEqual([version.ok, version.error.type], [false, 'VersionMismatch'])

  // just over the cap: through the socket, refused as TooLarge before it is decoded (its id unread)
  const cap = RULES.limits.transport.message_bytes.max
  const over = await sc.sendRaw(padded(cap + 1), null)
  assert.deepEqual([over.ok, over.error.type, over.id], [false, 'TooLarge', null])
  // exactly the cap (on tcp the CURVE frame is longer than the message): read and answered
  const atCap = await sc.sendRaw(padded(cap), padded.id)
  assert.deepEqual([atCap.ok, atCap.error.type], [false, 'BadRequest'])
  assert.match(atCap.error.message, /ping takes no args/)

  const badItem = await sc.call('execute', { arena: A, call: { id: 'x', actor: 'agent_a', op: 'craft', args: { item: 'oak_plank', count: 1, station: '' } } })
  assert.equal(badItem.error.type, 'BadRequest')
  assert.match(badItem.error.message, /unknown item "oak_plank".*did you mean "oak_planks"/)
  const badActor = await sc.call('execute', { arena: A, call: { id: 'x', actor: 'agent_z', op: 'wait', args: { ticks: 1 } } })
  assert.match(badActor.error.message, /agent_z.*not an agent/)
  const badSpec = await sc.call('reset', { arena: A, spec: { ...SPEC, inventories: { agent_a: { unobtainium: 1 } } } })
  assert.equal(badSpec.error.type, 'BadRequest')
  const noArena = await sc.call('observe', {})
  assert.deepEqual([noArena.error.type, /args\.arena must name an arena/.test(noArena.error.message)], ['BadRequest', true])
  const unknownArena = await sc.call('observe', { arena: 'zz' })
  assert.match(unknownArena.error.message, /no arena named "zz"; open it with open_arena \(arenas: a0\)/)
  const outside = await sc.call('reset', { arena: A, spec: { ...SPEC, positions: { agent_a: [30, 0, 0], agent_b: [3, 0, 0] } } })
  assert.match(outside.error.message, /agent_a at x=30, z=0 lies outside the arena/)
  const high = await sc.call('reset', { arena: A, spec: { ...SPEC, stations: [{ name: 'c', kind: 'chest', pos: [0, 900, 0], cells: [] }], containers: {} } })
  assert.equal(high.error.type, 'BadRequest')
  assert.match(high.error.message, /c at y=900 lies outside the arena: keep y from 0 to 16 above the floor \(limits.arena.height\)/)
  const flat = await sc.call('reset', { arena: A, ...SPEC })
  assert.match(flat.error.message, /reset args has unknown field\(s\) agents/)
  assert.equal(await result('ping'), 'pong', 'the sidecar keeps serving after refusals')
})

test('a message far over the cap is dropped by the socket, with its connection; the sidecar goes on', async () => {
  const sock = dealer(sc.ready, sc.keys, { receiveTimeout: 1500 })
  try {
    await sock.send(Buffer.alloc(8 * RULES.limits.transport.message_bytes.max))
    await assert.rejects(sock.receive(), /timed out|Socket temporarily unavailable|EAGAIN/i)
    // the dropped peer's DEALER reconnects; a proper request on it is answered
    await sock.send(encode({ v: 2, id: 1, op: 'ping', args: {} }))
    const [reply] = await sock.receive()
    assert.equal(decode(reply).result, 'pong')
  } finally {
    sock.close()
  }
  assert.equal((await sc.call('ping')).result, 'pong', 'other clients never notice')
})

test('on tcp only the client key the sidecar was started for gets in', async () => {
  const zmq = require('zeromq')
  for (const keys of [null, zmq.curveKeyPair()]) { // no CURVE at all; CURVE with another key pair
    const sock = dealer(sc.ready, keys, { receiveTimeout: 1000 })
    try {
      await sock.send(encode({ v: 2, id: 1, op: 'ping', args: {} }))
      await assert.rejects(sock.receive(), /timed out|Socket temporarily unavailable|EAGAIN/i)
    } finally {
      sock.close()
    }
  }
  assert.match(sc.stderr.join(''), /refused a CURVE connection from 127\.0\.0\.1.*not the client key this sidecar was started for/)
  assert.match(sc.ready.curve_server_key, /^.{40}$/)
})

test('reset twice without reconnecting the bots; observe reads the reset state', async () => {
  const first = await result('reset', SPEC)
  const second = await result('reset', SPEC)
  assert.deepEqual([first.rejoined, second.rejoined], [[], []])
  process.stderr.write(`reset ${first.ms} ms, ${second.ms} ms\n`)
  const truth = await result('observe')
  assert.deepEqual(truth, {
    inventories: { agent_a: { raw_iron: 2, coal: 1 }, agent_b: { cobblestone: 3, oak_planks: 8 } },
    containers: { chest_in: { oak_planks: 4 }, chest_out: {} },
    sites: { site: [] },
    furnaces: { furnace: { input: {}, fuel: {}, output: {} } }
  })
  assert.equal(await result('barrier'), true)
  assert.ok(!sc.stderr.join('').includes('disconnected'), 'no bot was disconnected')
})

test('scripted episode: withdraw, give + await_handoff, craft, deposit', async () => {
  await result('reset', { ...SPEC, inventories: {} })
  const start = Date.now()
  await ok('agent_a', 'withdraw', { station: 'chest_in', item: 'oak_planks', count: 4 })
  // giver and receiver run concurrently, one request per bot
  const [given, received] = await Promise.all([
    ok('agent_a', 'give', { to: 'agent_b', item: 'oak_planks', count: 4 }),
    ok('agent_b', 'await_handoff', { from: 'agent_a', item: 'oak_planks', count: 4 })
  ])
  assert.equal(given.length, 1)
  assert.deepEqual(received.map(e => e.kind), ['skill', 'handoff'])
  assert.deepEqual(received[1].data, {
    from: 'agent_a',
    to: 'agent_b',
    item: 'oak_planks',
    count: 4,
    inventories_before: { agent_a: { oak_planks: 4 }, agent_b: {} },
    inventories_after: { agent_a: {}, agent_b: { oak_planks: 4 } }
  })
  assert.equal(given[0].actions.tosses, 1)
  assert.deepEqual(Object.keys(received[0].actions), ['walks', 'window_clicks', 'tosses', 'placements'])
  await ok('agent_b', 'craft', { item: 'crafting_table', count: 1, station: '' })
  await ok('agent_b', 'deposit', { station: 'chest_out', item: 'crafting_table', count: 1 })
  const episodeMs = Date.now() - start
  const truth = await result('observe')
  assert.deepEqual(truth.inventories, { agent_a: {}, agent_b: {} })
  assert.deepEqual(truth.containers, { chest_in: {}, chest_out: { crafting_table: 1 } })
  process.stderr.write(`scripted episode ${episodeMs} ms\n`)
})

test('goto, table craft, place, furnace input/fuel/output and wait', async () => {
  await result('reset', SPEC)
  await ok('agent_b', 'goto', { station: 'table' })
  const crafted = await ok('agent_b', 'craft', { item: 'chest', count: 1, station: 'table' })
  assert.equal(crafted[0].data.count, 1)
  const placed = await ok('agent_b', 'place', { site: 'site', item: 'cobblestone', count: 3 })
  assert.deepEqual(placed[0].data.cells, [[-3, 0, -3], [-2, 0, -3], [-3, 1, -3]])
  await ok('agent_a', 'furnace_input', { station: 'furnace', item: 'raw_iron', count: 2 })
  await ok('agent_a', 'furnace_fuel', { station: 'furnace', item: 'coal', count: 1 })
  await ok('agent_a', 'furnace_output', { station: 'furnace', item: 'iron_ingot', count: 2 })
  const waited = await ok('agent_a', 'wait', { ticks: 4 })
  assert.ok(waited[0].data.ms >= 190)
  const truth = await result('observe')
  assert.deepEqual(truth.inventories, { agent_a: { iron_ingot: 2 }, agent_b: { chest: 1 } })
  assert.deepEqual(truth.sites, { site: [[-3, 0, -3, 'cobblestone'], [-3, 1, -3, 'cobblestone'], [-2, 0, -3, 'cobblestone']] })
  assert.deepEqual(truth.furnaces, { furnace: { input: {}, fuel: {}, output: {} } })

  // the next reset clears the site and restores inventories without reconnecting
  const again = await result('reset', SPEC)
  assert.deepEqual(again.rejoined, [])
  assert.deepEqual((await result('observe')).sites, { site: [] })
})

test('failing skills are events with ok:false and a reason, not protocol errors', async () => {
  await result('reset', SPEC)
  const cases = [
    ['agent_a', 'withdraw', { station: 'chest_in', item: 'oak_planks', count: 5 }, /holds 4 oak_planks, needs 5/],
    ['agent_a', 'deposit', { station: 'chest_out', item: 'stick', count: 1 }, /has 0 stick, needs 1/],
    ['agent_a', 'goto', { station: 'nowhere' }, /no station named "nowhere"/],
    ['agent_a', 'craft', { item: 'chest', count: 1, station: '' }, /needs a crafting table/],
    ['agent_b', 'craft', { item: 'crafting_table', count: 1, station: 'chest_in' }, /chest_in is a chest, not a crafting_table/],
    ['agent_a', 'give', { to: 'agent_a', item: 'coal', count: 1 }, /cannot give items to itself/],
    ['agent_b', 'place', { site: 'site', item: 'cobblestone', count: 4 }, /has 3 cobblestone, needs 4/]
  ]
  for (const [actor, op, args, reason] of cases) {
    const [event] = await execute(actor, op, args)
    assert.equal(event.ok, false, `${op} should fail`)
    assert.equal(event.kind, 'skill')
    assert.match(event.reason, reason)
  }
  const [timedOut] = await execute('agent_b', 'await_handoff', { from: 'agent_a', item: 'coal', count: 1 })
  assert.equal(timedOut.ok, false)
  assert.match(timedOut.reason, /did not receive 1 coal from agent_a/)
  const truth = await result('observe')
  assert.deepEqual(truth.inventories, SPEC.inventories, 'failed skills change nothing')
})

test('a failed give ends the peer\'s await_handoff at once, naming the give', async () => {
  await result('reset', SPEC)
  const started = Date.now()
  // the give is sent after the await started, and (second case) before it
  const [[given], [awaited]] = await Promise.all([
    execute('agent_a', 'give', { to: 'agent_b', item: 'coal', count: 3 }),
    execute('agent_b', 'await_handoff', { from: 'agent_a', item: 'coal', count: 3 })
  ])
  assert.equal(given.ok, false)
  assert.equal(awaited.ok, false)
  assert.match(awaited.reason, /agent_b did not receive 3 coal from agent_a: agent_a's give of 3 coal \(call c\d+\) failed: agent_a has 1 coal, needs 3/)
  assert.ok(Date.now() - started < SKILL_TIMEOUT_MS / 2, `${Date.now() - started} ms: not well before the ${SKILL_TIMEOUT_MS} ms skill timeout`)
  const [failedFirst] = await execute('agent_a', 'give', { to: 'agent_b', item: 'stick', count: 1 })
  assert.equal(failedFirst.ok, false)
  const t0 = Date.now()
  const [late] = await execute('agent_b', 'await_handoff', { from: 'agent_a', item: 'stick', count: 1 })
  assert.match(late.reason, /agent_a's give of 1 stick .* failed: agent_a has 0 stick, needs 1/)
  assert.ok(Date.now() - t0 < SKILL_TIMEOUT_MS / 2, `${Date.now() - t0} ms: not well before the ${SKILL_TIMEOUT_MS} ms skill timeout`)
  // a failed give is reported to one await only, and a reset forgets it
  const [second] = await execute('agent_b', 'await_handoff', { from: 'agent_a', item: 'stick', count: 1 })
  assert.match(second.reason, new RegExp(`timed out after ${SKILL_TIMEOUT_MS} ms`))
})

test('drop_bot (a test op) cuts one bot; its next skill is an ArenaFault and the next reset rebuilds the arena', async () => {
  await result('reset', SPEC)
  assert.deepEqual(await result('drop_bot', { agent: 'agent_b' }), { dropped: true })
  const fault = await sc.call('execute', { arena: A, call: { id: 'd1', actor: 'agent_b', op: 'wait', args: { ticks: 1 } } })
  assert.deepEqual([fault.ok, fault.error.type], [false, 'ArenaFault'])
  assert.match(fault.error.message, /arena a0: agent_b's bot is disconnected \(its connection closed: dropped by the drop_bot test op\); this episode is lost: the next reset rebuilds the arena/)
  const lost = await sc.call('observe', { arena: A })
  assert.equal(lost.error.type, 'ArenaFault', 'a faulted arena serves nothing of the lost episode')
  const bad = await sc.call('drop_bot', { arena: A, agent: 'agent_z' })
  assert.deepEqual([bad.ok, bad.error.type], [false, 'BadRequest'])
  const back = await result('reset', SPEC)
  assert.deepEqual([back.rebuilt, [...back.rejoined].sort()], [true, ['agent_a', 'agent_b']])
  assert.deepEqual((await result('observe')).inventories, SPEC.inventories)
  const again = await result('reset', SPEC)
  assert.deepEqual([again.rebuilt, again.rejoined], [false, []])
})

test("an arena lists its agents in the order the last reset named them, not the order their logins finished", async () => {
  const reversed = await result('reset', { ...SPEC, agents: ['agent_b', 'agent_a'] })
  assert.deepEqual(reversed.rejoined, [])
  assert.deepEqual((await result('hello')).arenas[0].agents, ['agent_b', 'agent_a'])
  await result('reset', SPEC)
  assert.deepEqual((await result('hello')).arenas[0].agents, ['agent_a', 'agent_b'])
})

test('a bot that dropped is rejoined at the next reset', async () => {
  const hello = await result('hello')
  assert.deepEqual(hello.arenas[0].agents, ['agent_a', 'agent_b'])
  // a reset for other agent names replaces the bots; the next reset with the originals rejoins them
  const other = await result('reset', { ...SPEC, agents: ['agent_a', 'agent_c'], positions: { agent_a: [0, 0, 0], agent_c: [3, 0, 0] }, inventories: {} })
  assert.deepEqual(other.rejoined, ['agent_c'])
  const back = await result('reset', SPEC)
  assert.deepEqual(back.rejoined, ['agent_b'])
  assert.deepEqual((await result('observe')).inventories, SPEC.inventories)
})
