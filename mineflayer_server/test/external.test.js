'use strict'
// External-server mode: a second World whose bots join an already running server as "external". The
// embedded flying-squid stands in for the official server; the external arena uses only operator
// commands, the bots' own views and tab_complete round trips, and its ground truth is compared with
// what the server itself holds.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startArena, RULES } = require('./helpers')
const { World } = require('../src/world')
const { ExternalArena } = require('../src/arenas/external')

let arena, ext
const SKILL_TIMEOUT_MS = 8000

const SPEC = {
  agents: ['ext_a', 'ext_b'],
  stations: [
    { name: 'chest_in', kind: 'chest', pos: [23, 0, 2], cells: [] },
    { name: 'chest_out', kind: 'chest', pos: [17, 0, 2], cells: [] },
    { name: 'table', kind: 'crafting_table', pos: [20, 0, 4], cells: [] },
    { name: 'furnace', kind: 'furnace', pos: [22, 0, -3], cells: [] },
    { name: 'site', kind: 'site', pos: [17, 0, -3], cells: [[17, 0, -3], [18, 0, -3]] }
  ],
  positions: { ext_a: [20, 0, 0], ext_b: [23, 0, 0] },
  inventories: { ext_a: { raw_iron: 1, coal: 1 }, ext_b: { cobblestone: 2, oak_planks: 8 } },
  containers: { chest_in: { oak_planks: 4, stick: 70 } },
  cook_ticks: 2
}

/** What the server holds for the external arena's stations and bots (the plugin's read-back API). */
async function serverTruth () {
  const at = ([x, y, z]) => arena.world.absolute([x, y, z])
  const st = name => SPEC.stations.find(s => s.name === name)
  return {
    inventories: { ext_a: arena.api.inventoryCounts(arena.player('ext_a')), ext_b: arena.api.inventoryCounts(arena.player('ext_b')) },
    containers: { chest_in: arena.api.containerCounts(at(st('chest_in').pos)), chest_out: arena.api.containerCounts(at(st('chest_out').pos)) },
    furnaces: { furnace: arena.api.furnaceCounts(at(st('furnace').pos)) },
    site: await arena.api.blockNames(st('site').cells.map(at))
  }
}

let n = 0
async function ok (actor, op, args) {
  const events = await ext.execute(ext.checkCall({ id: `e${++n}`, actor, op, args }))
  assert.equal(events[0].ok, true, `${op} failed: ${events[0].reason}`)
  return events
}

before(async () => {
  // the stand-in obeys the external arena's bots as a vanilla server obeys its ops.json
  arena = await startArena({ cookTicks: 2, operators: SPEC.agents })
  ext = new World({ arena: new ExternalArena({ host: '127.0.0.1', port: arena.port, log: arena.log }), rules: RULES, log: arena.log, skillTimeoutMs: SKILL_TIMEOUT_MS })
  await ext.ensureBots(SPEC.agents)
})
after(async () => {
  await ext.close()
  await arena.close()
})

test('the external arena finds the floor and resets by operator commands only', async () => {
  assert.equal(ext.floorY, arena.floorY)
  const { rejoined, ms } = await ext.reset(SPEC)
  assert.deepEqual(rejoined, [])
  const t0 = Date.now()
  const truth = await ext.observe()
  process.stderr.write(`external reset ${ms} ms (one chest filled by a bot), observe ${Date.now() - t0} ms (3 containers opened)\n`)
  assert.deepEqual(truth, {
    inventories: SPEC.inventories,
    containers: { chest_in: { oak_planks: 4, stick: 70 }, chest_out: {} },
    sites: { site: [] },
    furnaces: { furnace: { input: {}, fuel: {}, output: {} } }
  })
  const server = await serverTruth()
  assert.deepEqual(server.inventories, truth.inventories, 'the bots\' views agree with the server')
  assert.deepEqual(server.containers, truth.containers)
  const edits = arena.lines.filter(l => l.includes('[edit] ext_'))
  assert.ok(edits.some(l => l.includes('/setblock 23 ')), 'blocks are set by command')
  assert.ok(edits.some(l => l.includes('/give ext_b minecraft:oak_planks 8')))
  assert.ok(edits.some(l => l.includes('/tp ext_a 20.5 ')))
})

test('skills on the external server; ground truth read by the bots equals the server\'s', async () => {
  await ext.reset(SPEC)
  await ok('ext_a', 'withdraw', { station: 'chest_in', item: 'oak_planks', count: 4 })
  const [, received] = await Promise.all([
    ok('ext_a', 'give', { to: 'ext_b', item: 'oak_planks', count: 4 }),
    ok('ext_b', 'await_handoff', { from: 'ext_a', item: 'oak_planks', count: 4 })
  ])
  assert.deepEqual(received.map(e => e.kind), ['skill', 'handoff'])
  // flying-squid's item entities carry no readable item metadata, so the pickup is attributed to the toss
  assert.deepEqual(ext.arena.collects, [{ to: 'ext_b', item: 'oak_planks', count: 4, from: 'last toss' }], 'the receiver saw its pickup')
  await ok('ext_b', 'craft', { item: 'chest', count: 1, station: 'table' })
  await ok('ext_b', 'deposit', { station: 'chest_out', item: 'chest', count: 1 })
  const placed = await ok('ext_b', 'place', { site: 'site', item: 'cobblestone', count: 2 })
  assert.deepEqual(placed[0].data.cells, [[17, 0, -3], [18, 0, -3]])
  await ok('ext_a', 'furnace_input', { station: 'furnace', item: 'raw_iron', count: 1 })
  await ok('ext_a', 'furnace_fuel', { station: 'furnace', item: 'coal', count: 1 })
  await ok('ext_a', 'furnace_output', { station: 'furnace', item: 'iron_ingot', count: 1 })

  const truth = await ext.observe()
  assert.deepEqual(truth.inventories, { ext_a: { iron_ingot: 1 }, ext_b: { oak_planks: 4 } })
  assert.deepEqual(truth.containers, { chest_in: { stick: 70 }, chest_out: { chest: 1 } })
  assert.deepEqual(truth.sites, { site: [[17, 0, -3, 'cobblestone'], [18, 0, -3, 'cobblestone']] })
  assert.deepEqual(truth.furnaces, { furnace: { input: {}, fuel: {}, output: {} } })
  const server = await serverTruth()
  assert.deepEqual(server.inventories, truth.inventories)
  assert.deepEqual(server.containers, truth.containers)
  assert.deepEqual(server.site, ['cobblestone', 'cobblestone'])

  // the next reset empties the site and refills the chests through the same commands
  await ext.reset(SPEC)
  const again = await ext.observe()
  assert.deepEqual(again.sites, { site: [] })
  assert.deepEqual(again.containers, { chest_in: { oak_planks: 4, stick: 70 }, chest_out: {} })
  assert.deepEqual(again.inventories, SPEC.inventories)
  assert.deepEqual((await serverTruth()).containers, again.containers)
})

test('a failed give on the external server ends the peer\'s await at once', async () => {
  await ext.reset(SPEC)
  const started = Date.now()
  const [[given], [awaited]] = await Promise.all([
    ext.execute(ext.checkCall({ id: 'g', actor: 'ext_a', op: 'give', args: { to: 'ext_b', item: 'coal', count: 5 } })),
    ext.execute(ext.checkCall({ id: 'w', actor: 'ext_b', op: 'await_handoff', args: { from: 'ext_a', item: 'coal', count: 5 } }))
  ])
  assert.equal(given.ok, false)
  assert.equal(awaited.ok, false)
  assert.match(awaited.reason, /ext_a's give of 5 coal \(call g\) failed: ext_a has 1 coal, needs 5/)
  assert.ok(Date.now() - started < SKILL_TIMEOUT_MS / 2, `the await ended ${Date.now() - started} ms after the start, not at its ${SKILL_TIMEOUT_MS} ms timeout`)
})
