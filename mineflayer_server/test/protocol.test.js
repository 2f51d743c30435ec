'use strict'
// Wire-format and argument checks, without a server.

const test = require('node:test')
const assert = require('node:assert/strict')
const { encode, decode } = require('@msgpack/msgpack')
const { decodeRequest, encodeResult, encodeError, ProtocolError, PROTOCOL_VERSION } = require('../src/protocol')
const { checkEndpoint, parseArgs } = require('../src/cli')
const { parseSpec } = require('../src/spec')
const { checkSkillArgs } = require('../src/skills')
const { RULES } = require('./helpers')
const registry = require('prismarine-registry')('1.21.4')

// a CURVE public key as --client-key takes it (a tcp endpoint needs one)
const KEY = 'ab'.repeat(32)
const LIMITS = RULES.limits
const MAX_BYTES = LIMITS.transport.message_bytes.max

const rejects = (fn, type, pattern) => assert.throws(fn, err => err instanceof ProtocolError && err.type === type && pattern.test(err.message))

test('a well-formed request decodes to id, op, args', () => {
  assert.deepEqual(decodeRequest(encode({ v: 2, id: 7, op: 'ping', args: {} }), MAX_BYTES), { id: 7, op: 'ping', args: {} })
  assert.deepEqual(decodeRequest(encode({ v: 2, id: 8, op: 'ping' }), MAX_BYTES).args, {})
})

test('malformed requests are BadRequest, wrong versions VersionMismatch, big ones TooLarge', () => {
  const decode1 = payload => decodeRequest(payload, MAX_BYTES)
  rejects(() => decode1(Buffer.from([0xc1])), 'BadRequest', /not valid msgpack/)
  rejects(() => decode1(encode([1, 2])), 'BadRequest', /must be a msgpack map/)
  rejects(() => decode1(encode({ v: 2, id: 'x', op: 'ping' })), 'BadRequest', /"id" must be an integer/)
  rejects(() => decode1(encode({ v: 2, id: 1, op: '' })), 'BadRequest', /"op"/)
  rejects(() => decode1(encode({ v: 2, id: 1, op: 'ping', args: [1] })), 'BadRequest', /"args" must be a map/)
  rejects(() => decode1(encode({ v: 1, id: 1, op: 'ping' })), 'VersionMismatch', /v=1 .* v=2/)
  rejects(() => decodeRequest(Buffer.alloc(2048), 1024), 'TooLarge', /2048 bytes exceeds the 1024-byte cap/)
  assert.throws(() => decodeRequest(Buffer.alloc(8)), /needs the message cap/)
  try { decode1(encode({ v: 9, id: 5, op: 'ping' })) } catch (err) { assert.equal(err.id, 5) }
})

test('replies carry v, id and either result or a typed error', () => {
  assert.deepEqual(decode(encodeResult(3, 'pong')), { v: PROTOCOL_VERSION, id: 3, ok: true, result: 'pong' })
  assert.deepEqual(decode(encodeError(4, 'Internal', 'boom')), { v: 2, id: 4, ok: false, error: { type: 'Internal', message: 'boom' } })
  assert.throws(() => new ProtocolError('Nope', 'x'), /unknown protocol error type/)
})

test('the sidecar binds loopback tcp or ipc only', () => {
  assert.equal(checkEndpoint('tcp://127.0.0.1:5555'), 'tcp://127.0.0.1:5555')
  assert.equal(checkEndpoint('tcp://127.0.0.1:0'), 'tcp://127.0.0.1:*')
  assert.equal(checkEndpoint('ipc:///run/gencoord/x.sock'), 'ipc:///run/gencoord/x.sock')
  assert.throws(() => checkEndpoint('tcp://0.0.0.0:5555'), /binds loopback only/)
  assert.throws(() => checkEndpoint('tcp://10.0.0.1:5555'), /binds loopback only/)
  assert.throws(() => parseArgs(['--endpoint']), /bad argument/)
  assert.throws(() => parseArgs(['--endpont', 'x']), /bad argument --endpont/)
  assert.deepEqual(parseArgs(['--endpoint', 'tcp://127.0.0.1:1', '--rules', 'r', '--client-key', KEY, '--agents', 'x,y', '--cook-ticks', '3']).agents, ['x', 'y'])
  assert.throws(() => parseArgs(['--endpoint', 'tcp://127.0.0.1:1']), /--rules is required: the directory of skill_ops.json and recipes.json/)
})

test('tcp needs the client key the sidecar admits; ipc takes none', () => {
  const tcp = ['--endpoint', 'tcp://127.0.0.1:1', '--rules', 'r']
  assert.throws(() => parseArgs(tcp), /a tcp endpoint needs --client-key: the CURVE public key \(64 hex digits\)/)
  assert.throws(() => parseArgs([...tcp, '--client-key', 'xyz']), /needs --client-key/)
  assert.equal(parseArgs([...tcp, '--client-key', KEY]).clientKey, KEY)
  const ipc = ['--endpoint', 'ipc:///run/x.sock', '--rules', 'r']
  assert.equal(parseArgs(ipc).clientKey, null)
  assert.throws(() => parseArgs([...ipc, '--client-key', KEY]), /--client-key applies to a tcp endpoint/)
  assert.throws(() => parseArgs([...tcp, '--client-key', KEY, '--max-bytes', '10']), /bad argument --max-bytes/)
})

test('the wire limits come from limits.json, and a broken entry is named', () => {
  const { wireLimits } = require('../src/protocol')
  const wire = wireLimits(LIMITS)
  assert.equal(wire.transport.message_bytes, MAX_BYTES)
  assert.deepEqual(Object.keys(wire.spec).sort(), ['item_kinds', 'site_cells', 'stations'])
  assert.deepEqual(wire.ranges.arena, { reach: { min: 0, max: 24 }, height: { min: 0, max: 16 } })
  assert.throws(() => wireLimits({ ...LIMITS, spec: { ...LIMITS.spec, site_cells: { min: 2, max: 1 } } }), /limits.json: spec.site_cells needs \{min, max\}/)
  assert.throws(() => wireLimits({ args: LIMITS.args }), /transport.message_bytes/)
})

test('an ipc socket must lie in a folder only this user may enter', () => {
  const fs = require('fs')
  const os = require('os')
  const path = require('path')
  const { checkIpcFolder } = require('../src/socket')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gencoord-ipc-test-'))
  try {
    fs.chmodSync(dir, 0o700)
    checkIpcFolder(`ipc://${dir}/s.sock`)
    fs.chmodSync(dir, 0o755)
    assert.throws(() => checkIpcFolder(`ipc://${dir}/s.sock`), /has mode 755; other users could connect: use a folder only you may enter \(mode 0700\)/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('external-server and test-op flags', () => {
  const base = ['--endpoint', 'tcp://127.0.0.1:1', '--rules', 'r', '--client-key', KEY]
  const ext = parseArgs([...base, '--server', 'external', '--mc-host', 'mc.example.org', '--mc-port', '25565', '--test-ops'])
  assert.deepEqual([ext.server, ext.mcHost, ext.mcPort, ext.testOps], ['external', 'mc.example.org', 25565, true])
  assert.deepEqual([parseArgs(base).server, parseArgs(base).testOps], ['embedded', false])
  assert.throws(() => parseArgs([...base, '--server', 'external']), /--server external needs --mc-port/)
  assert.throws(() => parseArgs([...base, '--server', 'vanilla']), /--server must be embedded or external/)
  assert.throws(() => parseArgs([...base, '--mc-host', '10.0.0.2']), /--mc-host applies to --server external/)
  assert.throws(() => parseArgs([...base, '--server', 'external', '--mc-port', '1', '--mc-host', 'a b']), /not a host name/)
})

const spec = () => ({
  agents: ['agent_a', 'agent_b'],
  stations: [{ name: 'c', kind: 'chest', pos: [1, 0, 1], cells: [] }, { name: 's', kind: 'site', pos: [4, 0, 4], cells: [[4, 0, 4]] }],
  positions: { agent_a: [0, 0, 0], agent_b: [2, 0, 0] },
  inventories: { agent_a: { oak_log: 2, stick: 0 } },
  containers: { c: { oak_planks: 4 } },
  cook_ticks: 0
})

test('reset specs are normalized and checked field by field', () => {
  const parsed = parseSpec(registry, spec(), LIMITS)
  assert.deepEqual(parsed.inventories, { agent_a: { oak_log: 2 }, agent_b: {} })
  assert.equal(parsed.cookTicks, 0)
  const bad = (edit, pattern) => { const s = spec(); edit(s); rejects(() => parseSpec(registry, s, LIMITS), 'BadRequest', pattern) }
  bad(s => { s.inventories.agent_a = { oak_lg: 1 } }, /unknown item "oak_lg".*did you mean/)
  bad(s => { s.containers = { s: { stone: 1 } } }, /not a chest station/)
  bad(s => { s.stations[0].kind = 'oven' }, /kind "oven" is not one of/)
  bad(s => { delete s.positions.agent_b }, /positions\[agent_b\]/)
  bad(s => { s.agents = ['agent a'] }, /not a valid Minecraft username/)
  bad(s => { s.colour = 1 }, /unknown field\(s\) colour/)
  bad(s => { s.stations.push({ name: 'd', kind: 'furnace', pos: [1, 0, 1] }) }, /share position/)
})

test('a spec over limits.json\'s spec section is TooLarge before any entry is read', () => {
  const max = LIMITS.spec
  const big = (edit, pattern) => { const s = spec(); edit(s); rejects(() => parseSpec(registry, s, LIMITS), 'TooLarge', pattern) }
  const cells = n => Array.from({ length: n }, () => 'not even a cell')
  big(s => { s.stations[1].cells = cells(max.site_cells.max + 1) }, new RegExp(`${max.site_cells.max + 1} site cells \\(limits.spec.site_cells: at most ${max.site_cells.max}\\)`))
  big(s => { s.stations = Array.from({ length: max.stations.max + 1 }, () => 'junk') }, /stations \(limits.spec.stations: at most/)
  big(s => { s.containers.c = Object.fromEntries(Array.from({ length: max.item_kinds.max + 1 }, (_, i) => [`x${i}`, 1])) },
    /distinct items in one of its containers \(limits.spec.item_kinds/)
  // at the limit, the entries are checked as usual
  const atLimit = spec()
  atLimit.stations[1].cells = Array.from({ length: max.site_cells.max }, (_, i) => [4, 0, i % 20])
  assert.equal(parseSpec(registry, atLimit, LIMITS).stations[1].cells.length, max.site_cells.max)
})

test('skill args are checked against the op table (skill_ops.json) and minecraft-data', () => {
  const check = (op, args) => checkSkillArgs(RULES.ops, registry, op, args)
  assert.deepEqual(check('craft', { item: 'stick', count: 4, station: '' }), { item: 'stick', count: 4, station: '' })
  assert.deepEqual(check('wait', { ticks: 0 }), { ticks: 0 })
  rejects(() => check('fly', {}), 'BadRequest', /unknown skill op "fly"/)
  rejects(() => check('toString', {}), 'BadRequest', /unknown skill op "toString"/)
  rejects(() => check('withdraw', { station: 'c', item: 'diamonds', count: 1 }), 'BadRequest', /unknown item "diamonds"/)
  rejects(() => check('give', { to: 'b', item: 'stick', count: 0 }), 'BadRequest', /args.count must be an integer in \[1, 2304\]/)
  rejects(() => check('give', { to: 'b', item: 'stick', count: 2305 }), 'BadRequest', /args.count must be an integer in \[1, 2304\]/)
  rejects(() => check('wait', { ticks: -1 }), 'BadRequest', /args.ticks must be an integer in \[0, 1200\]/)
  rejects(() => check('wait', { ticks: 1201 }), 'BadRequest', /args.ticks/)
  rejects(() => check('goto', { station: '' }), 'BadRequest', /args.station must be a non-empty string/)
  rejects(() => check('goto', { station: 'c', speed: 2 }), 'BadRequest', /goto args has unknown field\(s\) speed; expected station/)
  rejects(() => check('craft', { item: 'stick', count: 4 }), 'BadRequest', /craft args lack station; expected exactly item, count, station/)
})

test('drop_bot is refused unless the sidecar was started with --test-ops', async () => {
  const { createOps } = require('../src/ops')
  const dropped = []
  const world = { dropBot: async name => { dropped.push(name); return true } }
  const pool = { get: name => ({ name, world }), owned: name => ({ name, world }) }
  await assert.rejects(createOps(pool, () => {}).drop_bot({ arena: 'a0', agent: 'agent_b' }),
    err => err instanceof ProtocolError && err.type === 'BadRequest' && /test-only op; start the sidecar with --test-ops/.test(err.message))
  assert.deepEqual(dropped, [])
  assert.deepEqual(await createOps(pool, () => {}, { testOps: true }).drop_bot({ arena: 'a0', agent: 'agent_b' }), { dropped: true })
  assert.deepEqual(dropped, ['agent_b'])
  await assert.rejects(createOps(pool, () => {}, { testOps: true }).drop_bot({ arena: 'a0', agent: 'agent_b', now: 1 }), /unknown field\(s\) now/)
})

test('arena flags', () => {
  const base = ['--endpoint', 'tcp://127.0.0.1:1', '--rules', 'r', '--client-key', KEY]
  const opts = parseArgs([...base, '--arenas', '4', '--max-arenas', '8', '--arena-x0', '-1024'])
  assert.deepEqual([opts.arenas, opts.maxArenas, opts.arenaX0], [4, 8, -1024])
  assert.deepEqual([parseArgs(base).arenas, parseArgs(base).maxArenas, parseArgs(base).arenaX0], [1, 16, 0])
  assert.throws(() => parseArgs([...base, '--arenas', '9', '--max-arenas', '8']), /--arenas 9 exceeds --max-arenas 8/)
  assert.throws(() => parseArgs([...base, '--max-arenas', '0']), /--max-arenas must be 1-64/)
})
